package k3j.model;

import static k3j.cache.ExpertPart.*;
import static k3j.model.LayerTensor.*;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertPart;
import k3j.config.LayerKind;
import k3j.config.MlpKind;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.io.DType;
import k3j.io.TensorInfo;

/**
 * Binds checkpoint tensor names to kernel arguments (docs/semantics.md §2.4-2.6) from the safetensors
 * headers alone: no tensor data is read here. The name table below is the whole contract: every tensor a
 * layer kind needs, its storage and its shape. dtype comes from the header, never assumed.
 *
 * <p>Pitfall: every name carries the {@code language_model.model.} prefix (the LM head is
 * {@code language_model.lm_head.weight}, no {@code .model.}); a binder that drops it finds nothing in the
 * released checkpoint.
 */
public final class Binder {
    private Binder() {}

    public static final String PREFIX = "language_model.model.";
    public static final String LAYERS = PREFIX + "layers.";
    public static final String EMBED = PREFIX + "embed_tokens.weight";
    public static final String FINAL_NORM = PREFIX + "norm.weight";
    public static final String OUTPUT_RES_NORM = PREFIX + "output_attn_res_norm.weight";
    public static final String OUTPUT_RES_PROJ = PREFIX + "output_attn_res_proj.weight";
    public static final String LM_HEAD = "language_model.lm_head.weight";

    /** How many problem lines one BindException carries before it summarises the rest. */
    static final int MAX_LINES = 200;

    /** One row of the name table: suffix (or full name), storage, the dims a matrix must have or a vector's element count, the take. */
    record Want(String name, Storage storage, long[] dims, long take) {
        static Want matrix(String name, long rows, long cols) {
            return new Want(name, Storage.MATRIX, new long[] {rows, cols}, rows * cols);
        }

        static Want vector(String name, long n) {
            return new Want(name, Storage.VECTOR, new long[] {n}, n);
        }

        static Want expert(ExpertPart part, long rows, long cols) {
            return new Want(part.suffix(), Storage.EXPERT_BYTES, new long[] {rows, cols}, rows * cols);
        }

        static Want matrix(LayerTensor t, long rows, long cols) {
            return matrix(t.suffix(), rows, cols);
        }

        static Want vector(LayerTensor t, long n) {
            return vector(t.suffix(), n);
        }

        /** A vector of which only the first {@code take} elements are used (A_log: one per head of a padded tensor). */
        static Want prefix(LayerTensor t, long take) {
            return new Want(t.suffix(), Storage.VECTOR, null, take);
        }
    }

    /** The tensors a layer needs ({@link LayerTensor}), per docs/semantics.md §2.5: storage and shape. */
    static List<Want> layerTable(ModelConfig c, int layer) {
        long e = c.hiddenSize();
        List<Want> w = new ArrayList<>();
        for (LayerTensor t : List.of(INPUT_NORM, POST_ATTENTION_NORM, ATTN_RES_NORM, ATTN_RES_PROJ, MLP_RES_NORM, MLP_RES_PROJ)) w.add(Want.vector(t, e));
        if (c.layerKind(layer) == LayerKind.KDA) {
            long p = c.kdaWidth(), d = c.kdaHeadDim(), h = c.kdaHeads(), k = c.shortConvKernel();
            for (LayerTensor t : List.of(KDA_Q, KDA_K, KDA_V, KDA_G)) w.add(Want.matrix(t, p, e));
            w.add(Want.matrix(KDA_O, e, p));
            for (LayerTensor t : List.of(KDA_Q_CONV, KDA_K_CONV, KDA_V_CONV)) w.add(Want.vector(t, p * k));
            w.add(Want.matrix(KDA_F_A, d, e));
            w.add(Want.matrix(KDA_F_B, p, d));
            w.add(Want.matrix(KDA_B, h, e));
            w.add(Want.prefix(KDA_A_LOG, h));
            w.add(Want.vector(KDA_DT_BIAS, p));
            w.add(Want.vector(KDA_O_NORM, d));
        } else {
            long hm = c.mlaHeads(), ql = c.qLoraRank(), kvl = c.kvLoraRank();
            w.add(Want.matrix(MLA_Q_A, ql, e));
            w.add(Want.vector(MLA_Q_A_NORM, ql));
            w.add(Want.matrix(MLA_Q_B, hm * c.mlaQkHeadDim(), ql));
            w.add(Want.matrix(MLA_KV_A, c.mlaKvAWidth(), e));
            w.add(Want.vector(MLA_KV_A_NORM, kvl));
            w.add(Want.matrix(MLA_KV_B, hm * c.mlaKvHeadDim(), kvl));
            w.add(Want.matrix(MLA_O, e, hm * c.vHeadDim()));
            if (c.mlaOutputGate()) w.add(Want.matrix(MLA_G, hm * c.vHeadDim(), e));
        }
        if (c.mlpKind(layer) == MlpKind.DENSE) {
            long di = c.denseIntermediate();
            w.add(Want.matrix(DENSE_GATE, di, e));
            w.add(Want.matrix(DENSE_UP, di, e));
            w.add(Want.matrix(DENSE_DOWN, e, di));
        } else {
            long n = c.expertCount(), lt = c.latentSize(), si = c.sharedIntermediate();
            w.add(Want.matrix(MOE_ROUTER, n, e));
            w.add(Want.vector(MOE_ROUTER_BIAS, n));
            w.add(Want.matrix(MOE_LATENT_DOWN, lt, e));
            w.add(Want.matrix(MOE_LATENT_UP, e, lt));
            w.add(Want.vector(MOE_LATENT_NORM, lt));
            w.add(Want.matrix(MOE_SHARED_GATE, si, e));
            w.add(Want.matrix(MOE_SHARED_UP, si, e));
            w.add(Want.matrix(MOE_SHARED_DOWN, e, si));
        }
        return w;
    }

    /** The six parts of one routed expert, in {@link ExpertPart} order (suffix after {@code experts.<M>.}). */
    static List<Want> expertTable(ModelConfig c) {
        long i = c.moeIntermediate(), lt = c.latentSize(), g = ModelConfig.MXFP4_GROUP_SIZE;
        return List.of(
                Want.expert(W1_PACKED, i, lt / 2), Want.expert(W1_SCALE, i, (lt + g - 1) / g),
                Want.expert(W2_PACKED, lt, i / 2), Want.expert(W2_SCALE, lt, (i + g - 1) / g),
                Want.expert(W3_PACKED, i, lt / 2), Want.expert(W3_SCALE, i, (lt + g - 1) / g));
    }

    static List<Want> modelTable(ModelConfig c) {
        long e = c.hiddenSize(), v = c.vocabSize();
        return List.of(Want.matrix(EMBED, v, e), Want.vector(FINAL_NORM, e), Want.vector(OUTPUT_RES_NORM, e),
                Want.vector(OUTPUT_RES_PROJ, e), Want.matrix(LM_HEAD, v, e));
    }

    /** Binds every layer of the config. */
    public static ModelBinding bind(CheckpointIndex index, ModelConfig config) {
        return bind(index, config, config.layerCount());
    }

    /**
     * Binds layers 0..layers−1 and the model-level tensors. Every problem of every layer is collected; any
     * problem is ONE {@link BindException} naming each layer that cannot bind and why.
     */
    public static ModelBinding bind(CheckpointIndex index, ModelConfig config, int layers) {
        if (layers < 1 || layers > config.layerCount()) {
            throw new IllegalArgumentException("layers must be 1.." + config.layerCount() + ", got " + layers);
        }
        List<String> problems = new ArrayList<>();
        checkpointAgainstConfig(index, config, problems);
        Map<String, TensorBinding> model = new LinkedHashMap<>();
        for (Want w : modelTable(config)) take(index, w.name(), w, model, problems);
        List<LayerBinding> bound = new ArrayList<>();
        List<Integer> failed = new ArrayList<>();
        List<String> layerProblems = new ArrayList<>();
        for (int l = 0; l < layers; l++) {
            List<String> lp = new ArrayList<>();
            LayerBinding b = bindLayer(index, config, l, lp);
            if (lp.isEmpty()) bound.add(b);
            else {
                failed.add(l);
                layerProblems.addAll(lp);
            }
        }
        if (!problems.isEmpty() || !failed.isEmpty()) {
            List<String> all = new ArrayList<>(problems);
            all.addAll(layerProblems);
            int total = all.size();
            if (total > MAX_LINES) {
                all = new ArrayList<>(all.subList(0, MAX_LINES));
                all.add("... and " + (total - MAX_LINES) + " more problems");
            }
            String summary = failed.isEmpty()
                    ? "the model-level tensors cannot bind (" + problems.size() + " problems)"
                    : failed.size() + " of " + layers + " layers are missing tensors or hold the wrong ones in this shard set "
                            + "(a partial download cannot run the model): layers " + ranges(failed)
                            + (problems.isEmpty() ? "" : "; and " + problems.size() + " model-level problems");
            throw new BindException(summary, failed, all);
        }
        return new ModelBinding(config, index, model, bound);
    }

    /**
     * What the config says against what the checkpoint holds, beyond the name table: a layer or an expert index
     * past the config's counts (a 12-layer config on a 13-layer checkpoint would silently run 12), a feature
     * switched off while its tensors exist (its weights would be silently dropped), MXFP4 experts under a config
     * that declares no quantization. Indices are parsed with a digit bound, before anything is sized by them.
     */
    static void checkpointAgainstConfig(CheckpointIndex index, ModelConfig c, List<String> problems) {
        int maxLayer = -1, maxExpert = -1;
        String layerExample = null, expertExample = null;
        for (TensorInfo t : index.tensors()) {
            String n = t.name();
            if (!n.startsWith(LAYERS)) continue;
            int l = index(n, LAYERS.length());
            if (l < 0 || l >= c.layerCount()) {
                if (l > maxLayer || l < 0) layerExample = n;
                maxLayer = l < 0 ? Integer.MAX_VALUE : Math.max(maxLayer, l);
                continue;
            }
            int at = n.indexOf(".block_sparse_moe.experts.");
            if (at >= 0) {
                int m = index(n, at + ".block_sparse_moe.experts.".length());
                if (m < 0 || m >= c.expertCount()) {
                    if (m < 0 || m > maxExpert) expertExample = n;
                    maxExpert = m < 0 ? Integer.MAX_VALUE : Math.max(maxExpert, m);
                }
            }
        }
        if (layerExample != null) {
            problems.add("the checkpoint holds layers past the config's num_hidden_layers = " + c.layerCount() + " (e.g. " + quote(layerExample)
                    + "): the config does not describe these weights");
        }
        if (expertExample != null) {
            problems.add("the checkpoint holds experts past the config's num_experts = " + c.expertCount() + " (e.g. " + quote(expertExample) + ")");
        }
        boolean anyMoe = false;
        for (int l = 0; l < c.layerCount(); l++) {
            String base = LAYERS + l + ".";
            if (!c.mlaOutputGate() && c.layerKind(l) == LayerKind.MLA && index.find(base + "self_attn.g_proj.weight").isPresent()) {
                problems.add("mla_use_output_gate = false, but the checkpoint holds " + quote(base + "self_attn.g_proj.weight") + " (its gate would be dropped)");
            }
            if (c.mlpKind(l) == MlpKind.MOE) {
                anyMoe = true;
                if (!c.latentNorm() && index.find(base + "block_sparse_moe.routed_expert_norm.weight").isPresent()) {
                    problems.add("latent_moe_use_norm = false, but the checkpoint holds " + quote(base + "block_sparse_moe.routed_expert_norm.weight")
                            + " (its norm would be dropped)");
                }
            }
        }
        if (anyMoe && !c.declaresMxfp4()) {
            problems.add("the config declares no quantization_config, but this engine decodes the routed experts as MXFP4: a config that does not say so is refused");
        }
    }

    /** The decimal index starting at {@code from} and ended by '.', or −1 (no digits, not ended, or above 9 digits). */
    static int index(String s, int from) {
        int v = 0, i = from;
        for (; i < s.length() && i - from < 10; i++) {
            char ch = s.charAt(i);
            if (ch == '.') break;
            if (ch < '0' || ch > '9') return -1;
            v = v * 10 + (ch - '0');
        }
        return i == from || i - from > 9 || i >= s.length() || s.charAt(i) != '.' ? -1 : v;
    }

    static LayerBinding bindLayer(CheckpointIndex index, ModelConfig c, int l, List<String> problems) {
        String base = LAYERS + l + ".";
        Map<String, TensorBinding> tensors = new LinkedHashMap<>();
        for (Want w : layerTable(c, l)) {
            TensorBinding b = take(index, base + w.name(), w, null, problems);
            if (b != null) tensors.put(w.name(), b);
        }
        List<ExpertLocation> experts = new ArrayList<>();
        if (c.mlpKind(l) == MlpKind.MOE) {
            List<Want> parts = expertTable(c);
            for (int m = 0; m < c.expertCount(); m++) {
                ExpertLocation loc = expert(index, base + LayerTensor.expert(m), parts, problems);
                if (loc != null) experts.add(loc);
            }
        }
        return new LayerBinding(l, c.layerKind(l), c.mlpKind(l), tensors, experts);
    }

    /** The six tensors of one expert: U8, rank 2, the exact shapes, all in one shard; located by header offsets. */
    static ExpertLocation expert(CheckpointIndex index, String base, List<Want> parts, List<String> problems) {
        ExpertLocation.Extent[] ext = new ExpertLocation.Extent[parts.size()];
        TensorInfo first = null;
        boolean ok = true;
        for (int i = 0; i < parts.size(); i++) {
            TensorBinding b = take(index, base + parts.get(i).name(), parts.get(i), null, problems);
            if (b == null) {
                ok = false;
                continue;
            }
            TensorInfo t = b.info();
            if (first == null) first = t;
            else if (t.shard() != first.shard()) {
                problems.add(quote(t.name()) + " is in shard " + t.file().getFileName() + ", its expert's other tensors in "
                        + first.file().getFileName() + " (an expert's six tensors must share one shard)");
                ok = false;
            }
            ext[i] = new ExpertLocation.Extent(t.offset(), t.length());
        }
        return ok ? new ExpertLocation(first.file(), List.of(ext)) : null;
    }

    /** Looks up one tensor and checks it against its row of the table; records a problem and returns null on any mismatch. */
    static TensorBinding take(CheckpointIndex index, String name, Want w, Map<String, TensorBinding> into, List<String> problems) {
        Optional<TensorInfo> found = index.find(name);
        if (found.isEmpty()) {
            problems.add("missing tensor " + quote(name));
            return null;
        }
        TensorInfo t = found.get();
        String bad = check(t, w);
        if (bad != null) {
            problems.add(quote(name) + " " + bad);
            return null;
        }
        TensorBinding b = new TensorBinding(w.name(), t, w.storage(), w.take());
        if (into != null) into.put(name, b);
        return b;
    }

    /** Why {@code t} does not fit {@code w}, or null when it does. */
    static String check(TensorInfo t, Want w) {
        DType d = t.dtype();
        switch (w.storage()) {
            case MATRIX -> {
                if (d != DType.BF16 && d != DType.F32 && d != DType.F16) {
                    return "is " + d + ", expected BF16 (kept narrow) or F32 / F16 (F32 matrix) for a dense matrix";
                }
                if (t.rank() != 2 || t.shape()[0] != w.dims()[0] || t.shape()[1] != w.dims()[1]) {
                    return "has shape " + t.shapeString() + ", expected " + Arrays.toString(w.dims());
                }
            }
            case VECTOR -> {
                if (d != DType.BF16 && d != DType.F32 && d != DType.F16) {
                    return "is " + d + ", expected BF16, F16 or F32 (widened to float at load)";
                }
                if (w.dims() == null) {
                    if (t.elementCount() < w.take()) {
                        return "has " + t.elementCount() + " elements " + t.shapeString() + ", expected at least " + w.take()
                                + " (the first " + w.take() + " are used, one per head)";
                    }
                } else if (t.elementCount() != w.dims()[0]) {
                    // element count only: proj vectors are [1, E] and conv taps [P, 1, k] on disk (docs/semantics.md §2.5)
                    return "has shape " + t.shapeString() + " (" + t.elementCount() + " elements), expected " + w.dims()[0] + " elements";
                }
            }
            case EXPERT_BYTES -> {
                if (d != DType.U8) return "is " + d + ", expected U8 (MXFP4 bytes)";
                if (t.rank() != 2 || t.shape()[0] != w.dims()[0] || t.shape()[1] != w.dims()[1]) {
                    String hint = w.name().endsWith("weight_scale") && t.rank() == 2 && t.shape()[1] != w.dims()[1]
                            ? " (the scale columns imply a group size other than 32)" : "";
                    return "has shape " + t.shapeString() + ", expected " + Arrays.toString(w.dims()) + hint;
                }
            }
        }
        return null;
    }

    static String quote(String name) {
        return "\"" + name + "\"";
    }

    /** 1-3, 5, 7-9: ascending layer indices with runs folded (also {@code k3 conform}'s layer lists). */
    public static String ranges(List<Integer> l) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < l.size(); ) {
            int j = i;
            while (j + 1 < l.size() && l.get(j + 1) == l.get(j) + 1) j++;
            if (sb.length() > 0) sb.append(", ");
            sb.append(l.get(i));
            if (j > i) sb.append('-').append(l.get(j));
            i = j + 1;
        }
        return sb.toString();
    }
}
