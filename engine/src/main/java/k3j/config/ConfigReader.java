package k3j.config;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Reads config.json into a {@link ModelConfig}, refusing to guess (docs/semantics.md §1, stricter where noted).
 *
 * <p>Two shapes, one lookup rule (§1.2): the config is NESTED iff the root has {@code text_config};
 * {@code linear_attn_config} sits in text_config (nested) or in the root (flat). A field is looked up in
 * text_config, then linear_attn_config, then the root, trying the primary key before its alias in each;
 * the first hit wins, and any later hit with a different value is refused as ambiguous.
 *
 * <p>Stricter than the C engine: a present field of the wrong type is reported as such, not as missing;
 * a number given as a string is refused; an int must be an integer JSON number (3.5 and 3.0 are
 * refused) that fits 32 bits; a boolean must be JSON true/false (a number is refused: HF writes
 * booleans, so a number means a hand edit nobody can interpret with confidence); duplicate keys and
 * trailing text are invalid JSON. Every missing or mistyped field is reported in one exception; range
 * and consistency rules follow, also all at once.
 */
public final class ConfigReader {
    /** Larger files are refused before reading (§1.1). The released config.json is about 4 KB. */
    public static final long MAX_CONFIG_BYTES = 1L << 28;

    private enum Type { INT, FLOAT, BOOL, INT_LIST }

    /** One JSON key: primary spelling, flat-fixture alias (or null), type, and the default (null = required). */
    private record Field(String key, String alias, Type type, Boolean absentDefault) {
        String spelling() {
            return alias == null ? key : key + " (or " + alias + ")";
        }
    }

    private static Field required(String key, Type type) {
        return new Field(key, null, type, null);
    }

    /**
     * The field table in lookup order (docs/semantics.md §1.3; moe_layer_freq added, full_attn_layers last).
     * THE ONLY DEFAULTS are the three booleans below, each defaulting to true, the released value
     * (docs/semantics.md §1.3; the official configuration states no class defaults). A default taken is listed in
     * {@link ModelConfig#defaulted()} and in the summary line, so it is never silent. Caveat: third-party
     * ports of the official config class default some of these to false; a config without them is
     * accepted as the C engine does, but says so.
     * moe_layer_freq is REQUIRED: the released config carries it (1) and the official MoE rule uses it (docs/semantics.md §1.4).
     */
    private static final List<Field> FIELDS = List.of(
            required("hidden_size", Type.INT),
            required("num_hidden_layers", Type.INT),
            required("vocab_size", Type.INT),
            required("rms_norm_eps", Type.FLOAT),
            new Field("num_heads", "kda_num_heads", Type.INT, null),
            new Field("head_dim", "kda_head_dim", Type.INT, null),
            required("short_conv_kernel_size", Type.INT),
            required("gate_lower_bound", Type.FLOAT),
            required("num_attention_heads", Type.INT),
            required("q_lora_rank", Type.INT),
            required("kv_lora_rank", Type.INT),
            required("qk_nope_head_dim", Type.INT),
            required("qk_rope_head_dim", Type.INT),
            required("v_head_dim", Type.INT),
            new Field("mla_use_output_gate", null, Type.BOOL, true),
            required("num_experts", Type.INT),
            required("num_experts_per_token", Type.INT),
            required("num_shared_experts", Type.INT),
            required("routed_expert_hidden_size", Type.INT),
            required("moe_intermediate_size", Type.INT),
            required("routed_scaling_factor", Type.FLOAT),
            new Field("moe_renormalize", null, Type.BOOL, true),
            new Field("latent_moe_use_norm", null, Type.BOOL, true),
            required("first_k_dense_replace", Type.INT),
            required("moe_layer_freq", Type.INT),
            required("intermediate_size", Type.INT),
            required("attn_res_block_size", Type.INT),
            new Field("activation_situ_beta", "situ_beta", Type.FLOAT, null),
            new Field("activation_situ_linear_beta", "situ_linear_beta", Type.FLOAT, null),
            required("full_attn_layers", Type.INT_LIST));

    /**
     * Keys the engine does not parametrise on but that would describe a DIFFERENT model if they said
     * otherwise: when present they must hold these values (absent is fine: the C fixtures omit them).
     * Each carries the sentence that says what a different value would mean.
     */
    private record Fixed(JsonNode value, String why) {}

    private static final Map<String, Fixed> FIXED_IF_PRESENT = fixedIfPresent();

    private static Map<String, Fixed> fixedIfPresent() {
        var m = new LinkedHashMap<String, Fixed>();
        var f = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance;
        String other = " describes a different model: this engine implements only ";
        m.put("mla_use_nope", new Fixed(f.booleanNode(true), other));         // MLA without rotary embeddings
        m.put("use_full_rank_gate", new Fixed(f.booleanNode(true), other));   // K3's full-rank KDA gates, not Kimi-Linear's low-rank ones
        m.put("hidden_act", new Fixed(f.textNode("situ"), other));            // SiTU-GLU in every MLP
        m.put("moe_router_activation_func", new Fixed(f.textNode("sigmoid"), other));
        m.put("num_expert_group", new Fixed(f.numberNode(1), other));         // group-limited routing is a no-op only at 1/1
        m.put("topk_group", new Fixed(f.numberNode(1), other));
        m.put("topk_method", new Fixed(f.textNode("noaux_tc"), " describes a different router: this engine implements only "));
        m.put("tie_word_embeddings", new Fixed(f.booleanNode(false), ": this engine reads a separate lm_head and implements only "));
        return m;
    }

    /**
     * Keys that describe the release but size nothing in the engine: accepted, several validated below
     * ({@link #checkInformational}). Any other key is listed in {@link ModelConfig#ignored()}.
     */
    private static final java.util.Set<String> INFORMATIONAL = java.util.Set.of("architectures", "model_type", "bos_token_id", "eos_token_id",
            "pad_token_id", "media_placeholder_token_id", "vision_config", "dtype", "torch_dtype",
            "max_position_embeddings", "num_key_value_heads", "num_nextn_predict_layers", "use_grouped_topk",
            "transformers_version", "text_config", "linear_attn_config", "quantization_config", "kda_layers");

    private ConfigReader() {}

    // ----------------------------------------------------------------------------------------------
    // entry points

    /** Reads and validates a config file; the source named in messages and the summary is the path. */
    public static ModelConfig read(Path path) {
        String source = path.toString();
        byte[] bytes;
        try {
            long size = k3j.io.SafeFiles.requireRegular(path, "a config");
            if (size > MAX_CONFIG_BYTES) {
                throw new ConfigException(source, List.of(
                        "implausible config size " + size + " bytes (at most " + MAX_CONFIG_BYTES + " = 2^28): not read"));
            }
            bytes = k3j.io.SafeFiles.readAll(path, MAX_CONFIG_BYTES, "a config");
        } catch (IOException e) {
            throw new ConfigException(source, "cannot read: " + k3j.io.SafeFiles.why(e), e);
        }
        JsonNode root;
        try {
            root = k3j.io.JsonTree.read(bytes);
        } catch (JacksonException e) {
            throw new ConfigException(source, source + ": not valid JSON (" + e.getOriginalMessage() + ")", e);
        } catch (IOException e) {
            throw new ConfigException(source, "cannot read: " + k3j.io.SafeFiles.why(e), e);
        }
        return read(root, source);
    }

    /** Validates a config already parsed, e.g. the {@code "config"} object embedded in a dump manifest. */
    public static ModelConfig read(JsonNode root, String source) {
        if (root == null || !root.isObject()) {
            throw new ConfigException(source, List.of("the root is not a JSON object: " + kind(root)));
        }
        var problems = new ArrayList<String>();
        boolean nested = root.has("text_config");
        var shape = nested ? ModelConfig.Shape.NESTED : ModelConfig.Shape.FLAT;

        // candidate objects in lookup order: text_config, linear_attn_config, root
        var candidates = new LinkedHashMap<String, JsonNode>();
        JsonNode text = root;
        if (nested) {
            text = root.get("text_config");
            if (text.isObject()) candidates.put("text_config", text);
            else problems.add("text_config is " + kind(text) + ", must be an object");
        }
        JsonNode linear = text.isObject() ? text.get("linear_attn_config") : null;
        String linearWhere = nested ? "text_config.linear_attn_config" : "linear_attn_config";
        if (linear != null && linear.isObject()) candidates.put(linearWhere, linear);
        else if (linear != null) problems.add(linearWhere + " is " + kind(linear) + ", must be an object");
        else if (nested && text.isObject()) {
            problems.add("text_config has no linear_attn_config object (where the KDA geometry and the ONE-based layer map live;"
                    + " a flat-only reader would make every layer KDA)");
        }
        if (nested && root.has("linear_attn_config")) {
            problems.add("linear_attn_config is at the root beside text_config.linear_attn_config: the nested shape reads only text_config's,"
                    + " so the root one would be silently ignored; keep one");
        }
        candidates.put("root", root);

        // phase 1: presence and type of every field, all reported together, missing ones first in table order
        int structural = problems.size();
        var values = new HashMap<String, Object>();
        var defaulted = new ArrayList<String>();
        var missing = new ArrayList<String>();
        for (Field field : FIELDS) {
            Hit hit = lookup(candidates, field.key, field.alias, problems);
            if (hit == null) {
                if (field.absentDefault != null) {
                    values.put(field.key, field.absentDefault);
                    defaulted.add(field.key + "=" + field.absentDefault);
                } else {
                    missing.add(field.spelling());
                }
                continue;
            }
            Object v = convert(field, hit, problems);
            if (v != null) values.put(field.key, v);
        }
        problems.addAll(structural, missing.stream().map(m -> "missing required field " + m).toList());
        for (var e : FIXED_IF_PRESENT.entrySet()) {
            Hit hit = lookup(candidates, e.getKey(), null, problems);
            Fixed want = e.getValue();
            if (hit != null && !sameValue(hit.node, want.value())) {
                problems.add(hit.where + " = " + hit.node + want.why() + e.getKey() + " = " + want.value());
            }
        }
        Hit quantization = lookup(candidates, "quantization_config", null, problems);
        if (quantization != null) checkQuantization(quantization, problems);
        if (!problems.isEmpty()) throw new ConfigException(source, problems);

        // phase 2: ranges and consistency, all reported together
        var c = new ModelConfig(source, shape,
                i(values, "hidden_size"), i(values, "num_hidden_layers"), i(values, "vocab_size"),
                f(values, "rms_norm_eps"),
                i(values, "num_heads"), i(values, "head_dim"), i(values, "short_conv_kernel_size"),
                f(values, "gate_lower_bound"),
                i(values, "num_attention_heads"), i(values, "q_lora_rank"), i(values, "kv_lora_rank"),
                i(values, "qk_nope_head_dim"), i(values, "qk_rope_head_dim"), i(values, "v_head_dim"),
                b(values, "mla_use_output_gate"),
                i(values, "num_experts"), i(values, "num_experts_per_token"), i(values, "num_shared_experts"),
                i(values, "routed_expert_hidden_size"), i(values, "moe_intermediate_size"),
                f(values, "routed_scaling_factor"),
                b(values, "moe_renormalize"), b(values, "latent_moe_use_norm"),
                i(values, "first_k_dense_replace"), i(values, "moe_layer_freq"), i(values, "intermediate_size"),
                i(values, "attn_res_block_size"),
                f(values, "activation_situ_beta"), f(values, "activation_situ_linear_beta"),
                intList(values, "full_attn_layers"),
                quantization != null, defaulted, 0, List.of());
        validate(c, lookup(candidates, "kda_layers", null, problems), problems);
        int maxPositions = checkInformational(candidates, c, problems);
        c = new ModelConfig(c.source(), c.shape(), c.hiddenSize(), c.layerCount(), c.vocabSize(), c.rmsNormEps(), c.kdaHeads(), c.kdaHeadDim(),
                c.shortConvKernel(), c.gateLowerBound(), c.mlaHeads(), c.qLoraRank(), c.kvLoraRank(), c.qkNopeHeadDim(), c.qkRopeHeadDim(),
                c.vHeadDim(), c.mlaOutputGate(), c.expertCount(), c.topK(), c.sharedExpertCount(), c.latentSize(), c.moeIntermediate(),
                c.routedScalingFactor(), c.moeRenormalize(), c.latentNorm(), c.firstDenseLayers(), c.moeLayerFreq(), c.denseIntermediate(),
                c.attnResBlockSize(), c.situBeta(), c.situLinearBeta(), c.fullAttnLayers(), c.declaresMxfp4(), c.defaulted(), maxPositions,
                ignoredKeys(candidates));
        if (!problems.isEmpty()) throw new ConfigException(source, problems);
        return c;
    }

    // ----------------------------------------------------------------------------------------------
    // lookup and types

    /** A key found in one candidate object; where = "text_config.hidden_size" etc. */
    private record Hit(String where, JsonNode node) {}

    private static Hit lookup(Map<String, JsonNode> candidates, String key, String alias, List<String> problems) {
        Hit first = null;
        for (var c : candidates.entrySet()) {
            for (String k : alias == null ? List.of(key) : List.of(key, alias)) {
                JsonNode n = c.getValue().get(k);
                if (n == null) continue;
                var hit = new Hit(c.getKey().equals("root") ? k : c.getKey() + "." + k, n);
                if (first == null) first = hit;
                else if (!sameValue(first.node, n)) {
                    problems.add(key + " is ambiguous: " + first.where + " = " + first.node + " but " + hit.where + " = " + n
                            + " (lookup order text_config, linear_attn_config, root would silently take the first)");
                }
            }
        }
        return first;
    }

    private static boolean sameValue(JsonNode a, JsonNode b) {
        // 1e400 parses as an infinite double, which has no decimal value: compared as doubles, so it is named, not thrown
        if (a.isNumber() && b.isNumber()) return finite(a) && finite(b) ? a.decimalValue().compareTo(b.decimalValue()) == 0 : a.doubleValue() == b.doubleValue();
        return a.equals(b);
    }

    /** Whether a JSON number has a finite value (a literal such as 1e400 overflows a double to infinity). */
    public static boolean finite(JsonNode n) {
        return !n.isFloatingPointNumber() || Double.isFinite(n.doubleValue());
    }

    private static Object convert(Field field, Hit hit, List<String> problems) {
        JsonNode n = hit.node;
        switch (field.type) {
            case INT -> {
                if (n.isIntegralNumber() && n.canConvertToInt()) return n.intValue();
                problems.add("wrong type: " + hit.where + " = " + n + " " + notAn("integer", n));
            }
            case FLOAT -> {
                if (n.isNumber()) {
                    float v = (float) n.doubleValue();
                    if (Float.isFinite(v)) return v;
                    problems.add("wrong type: " + hit.where + " = " + n + " does not fit a 32-bit float");
                } else {
                    problems.add("wrong type: " + hit.where + " = " + n + " " + notAn("number", n));
                }
            }
            case BOOL -> {
                if (n.isBoolean()) return n.booleanValue();
                problems.add("wrong type: " + hit.where + " = " + n + " " + notAn("boolean (true/false)", n));
            }
            case INT_LIST -> {
                if (!n.isArray()) {
                    problems.add("wrong type: " + hit.where + " " + notAn("array of integers", n));
                    return null;
                }
                var out = new ArrayList<Integer>();
                for (int i = 0; i < n.size(); i++) {
                    JsonNode e = n.get(i);
                    if (e.isIntegralNumber() && e.canConvertToInt()) out.add(e.intValue());
                    else problems.add("wrong type: " + hit.where + "[" + i + "] = " + e + " " + notAn("integer", e));
                }
                if (out.size() == n.size()) return out;
            }
        }
        return null;
    }

    private static String notAn(String wanted, JsonNode n) {
        if (n.isTextual()) return "is a string; must be a JSON " + wanted + ", not quoted";
        if (n.isIntegralNumber() && wanted.equals("integer")) return "does not fit a 32-bit int";
        if (n.isNumber() && wanted.equals("integer")) return "is not an integer; must be an integer JSON number (no fraction or exponent)";
        return "is " + kind(n) + "; must be a JSON " + wanted;
    }

    private static String kind(JsonNode n) {
        if (n == null || n.isMissingNode()) return "empty";
        return switch (n.getNodeType()) {
            case ARRAY -> "an array";
            case OBJECT -> "an object";
            case BOOLEAN -> "a boolean";
            case NUMBER -> "a number";
            case STRING -> "a string";
            case NULL -> "null";
            default -> n.getNodeType().toString().toLowerCase();
        };
    }

    private static int i(Map<String, Object> v, String key) {
        return (Integer) v.get(key);
    }

    private static float f(Map<String, Object> v, String key) {
        return (Float) v.get(key);
    }

    private static boolean b(Map<String, Object> v, String key) {
        return (Boolean) v.get(key);
    }

    @SuppressWarnings("unchecked")
    private static List<Integer> intList(Map<String, Object> v, String key) {
        return (List<Integer>) v.get(key);
    }

    // ----------------------------------------------------------------------------------------------
    // informational keys

    /** Validates the informational keys that can contradict the engine; returns max_position_embeddings (0 = absent). */
    private static int checkInformational(Map<String, JsonNode> candidates, ModelConfig c, List<String> p) {
        for (String id : List.of("bos_token_id", "eos_token_id", "pad_token_id", "media_placeholder_token_id")) {
            Hit h = lookup(candidates, id, null, p);
            if (h == null || h.node.isNull()) continue;
            if (!h.node.isIntegralNumber() || !h.node.canConvertToInt() || h.node.intValue() < 0 || h.node.intValue() >= c.vocabSize()) {
                p.add(h.where + " = " + h.node + " is not a token id of the vocabulary 0.." + (c.vocabSize() - 1));
            }
        }
        Hit kv = lookup(candidates, "num_key_value_heads", null, p);
        if (kv != null && !(kv.node.isIntegralNumber() && kv.node.canConvertToInt() && kv.node.intValue() == c.mlaHeads())) {
            p.add(kv.where + " = " + kv.node + " differs from num_attention_heads = " + c.mlaHeads() + " (MLA expands one latent to every head)");
        }
        Hit pos = lookup(candidates, "max_position_embeddings", null, p);
        if (pos == null) return 0;
        if (!pos.node.isIntegralNumber() || !pos.node.canConvertToInt() || pos.node.intValue() < 1) {
            p.add(pos.where + " = " + pos.node + " must be a positive integer");
            return 0;
        }
        return pos.node.intValue();
    }

    /** Keys in the config's objects that are neither fields, fixed, nor informational: listed, never silently dropped. */
    private static List<String> ignoredKeys(Map<String, JsonNode> candidates) {
        var known = new java.util.HashSet<>(INFORMATIONAL);
        for (Field f : FIELDS) {
            known.add(f.key);
            if (f.alias != null) known.add(f.alias);
        }
        known.addAll(FIXED_IF_PRESENT.keySet());
        var out = new ArrayList<String>();
        for (var c : candidates.entrySet()) {
            c.getValue().fieldNames().forEachRemaining(k -> {
                if (!known.contains(k)) out.add(c.getKey().equals("root") ? k : c.getKey() + "." + k);
            });
        }
        return out;
    }

    // ----------------------------------------------------------------------------------------------
    // quantization_config

    /** MXFP4 experts: every compressed-tensors group must use the engine's group size 32 (docs/semantics.md §3.4). */
    private static void checkQuantization(Hit q, List<String> problems) {
        JsonNode groups = q.node.path("config_groups");
        if (!q.node.isObject() || !groups.isObject() || groups.isEmpty()) {
            problems.add(q.where + " must be an object with a non-empty config_groups (to check the MXFP4 group_size = "
                    + ModelConfig.MXFP4_GROUP_SIZE + ")");
            return;
        }
        expect(q.node, "quant_method", "compressed-tensors", q.where, problems);
        expect(q.node, "format", "mxfp4-pack-quantized", q.where, problems);
        for (var g : groups.properties()) {
            JsonNode weights = g.getValue().path("weights");
            String at = q.where + ".config_groups." + g.getKey() + ".weights";
            JsonNode bits = weights.path("num_bits");
            if (!(bits.isIntegralNumber() && bits.intValue() == 4)) problems.add(at + ".num_bits = " + bits + ": MXFP4 is 4 bits (this engine decodes nothing else)");
            expect(weights, "type", "float", at, problems);
            if (weights.has("strategy")) expect(weights, "strategy", "group", at, problems);
            String where = q.where + ".config_groups." + g.getKey() + ".weights.group_size";
            JsonNode size = weights.path("group_size");
            if (size.isMissingNode()) problems.add("missing " + where + " (must be " + ModelConfig.MXFP4_GROUP_SIZE + ")");
            else if (!size.isIntegralNumber() || !size.canConvertToInt() || size.intValue() != ModelConfig.MXFP4_GROUP_SIZE) {
                problems.add(where + " = " + size + ", but MXFP4 scales cover groups of " + ModelConfig.MXFP4_GROUP_SIZE
                        + " inputs: group_size must be " + ModelConfig.MXFP4_GROUP_SIZE);
            }
        }
    }

    private static void expect(JsonNode obj, String key, String want, String where, List<String> problems) {
        JsonNode v = obj.path(key);
        if (!v.isTextual() || !v.asText().equals(want)) {
            problems.add(where + "." + key + " = " + (v.isMissingNode() ? "(missing)" : v.toString()) + ": this engine implements only " + key + " = \"" + want + "\" (MXFP4 experts)");
        }
    }

    // ----------------------------------------------------------------------------------------------
    // ranges and consistency

    private static void validate(ModelConfig c, Hit kdaLayers, List<String> p) {
        positive(p, "hidden_size", c.hiddenSize());
        positive(p, "num_hidden_layers", c.layerCount());
        positive(p, "vocab_size", c.vocabSize());
        positive(p, "num_heads (KDA heads)", c.kdaHeads());
        positive(p, "head_dim (KDA head dim)", c.kdaHeadDim());
        if (c.shortConvKernel() < 1) p.add("short_conv_kernel_size = " + c.shortConvKernel() + " must be >= 1 (conv taps)");
        positive(p, "num_attention_heads", c.mlaHeads());
        positive(p, "q_lora_rank", c.qLoraRank());
        positive(p, "kv_lora_rank", c.kvLoraRank());
        positive(p, "qk_nope_head_dim", c.qkNopeHeadDim());
        if (c.qkRopeHeadDim() < 0) p.add("qk_rope_head_dim = " + c.qkRopeHeadDim() + " must be >= 0");
        positive(p, "v_head_dim", c.vHeadDim());
        positive(p, "num_experts", c.expertCount());
        positive(p, "num_experts_per_token", c.topK());
        positive(p, "num_shared_experts", c.sharedExpertCount());
        positive(p, "routed_expert_hidden_size", c.latentSize());
        positive(p, "moe_intermediate_size", c.moeIntermediate());
        positive(p, "intermediate_size", c.denseIntermediate());
        positive(p, "moe_layer_freq", c.moeLayerFreq());
        positive(p, "attn_res_block_size", c.attnResBlockSize());
        if (!(c.rmsNormEps() > 0)) p.add("rms_norm_eps = " + c.rmsNormEps() + " must be > 0");
        if (!(c.gateLowerBound() < 0)) p.add("gate_lower_bound = " + c.gateLowerBound() + " must be < 0 (a decay bound)");
        if (!(c.routedScalingFactor() > 0)) p.add("routed_scaling_factor = " + c.routedScalingFactor() + " must be > 0");
        if (!(c.situBeta() > 0)) p.add("activation_situ_beta = " + c.situBeta() + " must be > 0 (it divides)");
        if (!(c.situLinearBeta() > 0)) p.add("activation_situ_linear_beta = " + c.situLinearBeta() + " must be > 0 (it divides)");
        if (c.firstDenseLayers() < 0 || c.firstDenseLayers() > c.layerCount()) {
            p.add("first_k_dense_replace = " + c.firstDenseLayers() + " is outside 0.." + c.layerCount());
        }
        if (c.topK() > ModelConfig.MAX_TOP_K) {
            p.add("num_experts_per_token = " + c.topK() + " selects top-" + c.topK() + ", but this engine supports at most "
                    + ModelConfig.MAX_TOP_K + " (ModelConfig.MAX_TOP_K)");
        }
        if (c.topK() > c.expertCount()) {
            p.add("num_experts_per_token = " + c.topK() + " exceeds num_experts = " + c.expertCount());
        }
        if (c.declaresMxfp4()) {
            multipleOfGroup(p, "routed_expert_hidden_size", c.latentSize(), "w1/w3");
            multipleOfGroup(p, "moe_intermediate_size", c.moeIntermediate(), "w2");
        }
        atMost(p, "num_hidden_layers", c.layerCount(), ModelConfig.MAX_LAYERS);
        atMost(p, "hidden_size", c.hiddenSize(), ModelConfig.MAX_WIDTH);
        atMost(p, "vocab_size", c.vocabSize(), ModelConfig.MAX_VOCAB);
        atMost(p, "num_experts", c.expertCount(), ModelConfig.MAX_EXPERTS);
        atMost(p, "num_shared_experts", c.sharedExpertCount(), ModelConfig.MAX_SHARED_EXPERTS);
        atMost(p, "num_heads (KDA heads)", c.kdaHeads(), ModelConfig.MAX_HEADS);
        atMost(p, "num_attention_heads", c.mlaHeads(), ModelConfig.MAX_HEADS);
        for (var e : java.util.Map.of("head_dim (KDA head dim)", c.kdaHeadDim(), "q_lora_rank", c.qLoraRank(), "kv_lora_rank", c.kvLoraRank(),
                "qk_nope_head_dim", c.qkNopeHeadDim(), "qk_rope_head_dim", c.qkRopeHeadDim(), "v_head_dim", c.vHeadDim(),
                "routed_expert_hidden_size", c.latentSize()).entrySet()) {
            atMost(p, e.getKey(), e.getValue(), ModelConfig.MAX_WIDTH);
        }
        atMost(p, "moe_intermediate_size", c.moeIntermediate(), ModelConfig.MAX_INTERMEDIATE);
        atMost(p, "intermediate_size", c.denseIntermediate(), ModelConfig.MAX_INTERMEDIATE);
        atMost(p, "short_conv_kernel_size", c.shortConvKernel(), ModelConfig.MAX_CONV_KERNEL);
        // A block longer than the model is valid (one block holds every layer, as in small fixtures); only the
        // absolute range is absurd.
        atMost(p, "attn_res_block_size", c.attnResBlockSize(), ModelConfig.MAX_LAYERS);
        if (c.moeLayerFreq() > c.layerCount() && c.layerCount() > 0) p.add("moe_layer_freq = " + c.moeLayerFreq() + " exceeds num_hidden_layers = " + c.layerCount());
        scalar(p, "routed_scaling_factor", c.routedScalingFactor());
        scalar(p, "activation_situ_beta", c.situBeta());
        scalar(p, "activation_situ_linear_beta", c.situLinearBeta());
        if (!(c.gateLowerBound() >= -ModelConfig.MAX_SCALE)) p.add("gate_lower_bound = " + c.gateLowerBound() + " is below -" + ModelConfig.MAX_SCALE);
        if (!(c.rmsNormEps() < 1)) p.add("rms_norm_eps = " + c.rmsNormEps() + " must be < 1 (an epsilon, not a scale)");
        fitsInt(p, "num_heads * head_dim", (long) c.kdaHeads() * c.kdaHeadDim());
        fitsInt(p, "num_attention_heads * (qk_nope_head_dim + qk_rope_head_dim)", (long) c.mlaHeads() * (c.qkNopeHeadDim() + c.qkRopeHeadDim()));
        fitsInt(p, "num_attention_heads * (qk_nope_head_dim + v_head_dim)", (long) c.mlaHeads() * (c.qkNopeHeadDim() + c.vHeadDim()));
        fitsInt(p, "moe_intermediate_size * num_shared_experts", (long) c.moeIntermediate() * c.sharedExpertCount());
        checkLayerMap(c, kdaLayers, p);
    }

    /** full_attn_layers is ONE-based (docs/semantics.md §11.1); a zero-based list is the classic off-by-one, refused by name. */
    private static void checkLayerMap(ModelConfig c, Hit kdaLayers, List<String> p) {
        List<Integer> list = c.fullAttnLayers();
        int n = c.layerCount();
        if (n > ModelConfig.MAX_LAYERS) return;   // refused above; the complement below would loop 2^31 times
        if (list.isEmpty()) {
            p.add("full_attn_layers is empty: K3 has MLA layers, and an empty list usually means a reader lost them");
            return;
        }
        var seen = new TreeSet<Integer>();
        for (int i = 0; i < list.size(); i++) {
            int v = list.get(i);
            if (v < 1 || v > n) {
                p.add("full_attn_layers[" + i + "] = " + v + " is outside 1.." + n + " (the list is ONE-based"
                        + (v == 0 ? "; this entry 0 says it was written zero-based: add 1 to every entry" : "") + ")");
            } else if (!seen.add(v)) {
                p.add("full_attn_layers[" + i + "] = " + v + " is a duplicate");
            }
        }
        if (seen.size() >= n) {
            p.add("full_attn_layers lists all " + n + " layers as MLA: at least one KDA layer must remain");
        }
        if (kdaLayers == null) return;
        // the official reading: layer i is KDA iff i+1 is in kda_layers (docs/semantics.md §1.4); it must agree with ours
        var kda = new TreeSet<Integer>();
        JsonNode k = kdaLayers.node();
        boolean wellTyped = k.isArray();
        if (wellTyped) for (JsonNode e : k) {
            if (e.isIntegralNumber() && e.canConvertToInt()) kda.add(e.intValue());
            else wellTyped = false;
        }
        if (!wellTyped || kda.size() != k.size()) {
            p.add(kdaLayers.where() + " must be an array of distinct integers (ONE-based KDA layers)");
            return;
        }
        var complement = new TreeSet<Integer>();
        for (int l = 1; l <= n; l++) if (!seen.contains(l)) complement.add(l);
        if (!kda.equals(complement)) {
            var onlyKda = new TreeSet<>(kda);
            onlyKda.removeAll(complement);
            var onlyComplement = new TreeSet<>(complement);
            onlyComplement.removeAll(kda);
            p.add(kdaLayers.where() + " is not the complement of full_attn_layers over 1.." + n + " (both ONE-based):"
                    + " listed as both KDA and MLA, or out of range " + onlyKda + "; listed as neither " + onlyComplement
                    + (looksZeroBased(seen, kda, n) ? "; full_attn_layers + 1 would agree, so it looks zero-based" : ""));
        }
    }

    private static boolean looksZeroBased(TreeSet<Integer> mla, TreeSet<Integer> kda, int n) {
        for (int l = 1; l <= n; l++) if (mla.contains(l - 1) == kda.contains(l)) return false;
        return true;
    }

    private static void atMost(List<String> p, String name, int v, int max) {
        if (v > max) p.add(name + " = " + v + " is above " + max + ", the most this engine accepts (ModelConfig bounds; the released K3 is far below)");
    }

    private static void scalar(List<String> p, String name, float v) {
        if (v > ModelConfig.MAX_SCALE) p.add(name + " = " + v + " is above " + ModelConfig.MAX_SCALE + ": no trained model uses such a value");
    }

    private static void positive(List<String> p, String name, int v) {
        if (v <= 0) p.add(name + " = " + v + " must be > 0");
    }

    private static void multipleOfGroup(List<String> p, String name, int v, String tensors) {
        if (v % ModelConfig.MXFP4_GROUP_SIZE != 0) {
            p.add(name + " = " + v + " is not a multiple of " + ModelConfig.MXFP4_GROUP_SIZE
                    + ": the MXFP4 expert " + tensors + " scales need whole groups of 32 inputs");
        }
    }

    private static void fitsInt(List<String> p, String what, long v) {
        if (v > Integer.MAX_VALUE) p.add(what + " = " + v + " does not fit a 32-bit int (implausible geometry)");
    }
}
