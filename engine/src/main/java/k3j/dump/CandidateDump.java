package k3j.dump;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.io.StrictJson;
import k3j.model.LayerStages;
import k3j.verdict.Finding;

/**
 * Another engine's activations (docs/formats.md §9, {@code k3-candidate} v1): every layer run ALONE
 * from a reference dump's own inputs, as the engine computed it, plus its teacher-forced logits over the
 * reference's ids and its greedy ids. Same container as the reference dump (directory or archive, sizes and
 * sha256 checked). The manifest names the engine and its precision, and the reference by the sha256 of its
 * manifest.json: a candidate is only meaningful against the dump whose inputs it was fed.
 *
 * <p>What the engine did not produce is absent, never zero: a layer's missing stage, routing or logits is a
 * {@link Finding#MISSING_STAGE} of the comparison; a layer the engine could not run carries its error.
 */
public final class CandidateDump {
    public static final String FORMAT = "k3-candidate";

    private final ReferenceDump files;

    private CandidateDump(ReferenceDump files) {
        this.files = files;
        JsonNode m = files.manifest();
        String w = files.where();
        String inputs = StrictJson.text(m, "layer_inputs", w, ReferenceDump::mismatch);
        if (!inputs.equals("reference")) {
            throw ReferenceDump.mismatch(files.source() + ": layer_inputs is '" + inputs + "'; a candidate's layers must be run alone from the reference's inputs ('reference')");
        }
        JsonNode engine = StrictJson.object(m, "engine", w, ReferenceDump::mismatch);
        StrictJson.text(engine, "name", w + " engine", ReferenceDump::mismatch);
        StrictJson.text(engine, "precision", w + " engine", ReferenceDump::mismatch);
        JsonNode reference = StrictJson.object(m, "reference", w, ReferenceDump::mismatch);
        StrictJson.text(reference, "manifest_sha256", w + " reference", ReferenceDump::mismatch);
        if (reference.has("dir")) StrictJson.text(reference, "dir", w + " reference", ReferenceDump::mismatch);
        JsonNode layers = StrictJson.array(m, "layers", w, ReferenceDump::mismatch);
        java.util.Set<Long> seen = new java.util.HashSet<>();
        for (int i = 0; i < layers.size(); i++) {
            JsonNode l = layers.get(i);
            String lw = w + " layers[" + i + "]";
            if (!l.isObject()) throw ReferenceDump.mismatch(lw + " is " + StrictJson.describe(l) + ", must be an object");
            long index = StrictJson.integer(l, "index", lw, ReferenceDump::mismatch);
            if (!seen.add(index)) throw ReferenceDump.mismatch(lw + ".index " + index + " is listed twice");
            for (String k : List.of("mixer", "mlp", "error")) if (l.has(k)) StrictJson.text(l, k, lw, ReferenceDump::mismatch);
        }
        JsonNode notes = m.get("notes");
        if (notes != null && notes.has("logits")) StrictJson.text(notes, "logits", w + " notes", ReferenceDump::mismatch);
    }

    /** Opens a candidate directory or a .tar.gz / .tar.xz of one. */
    public static CandidateDump open(Path path) {
        return new CandidateDump(ReferenceDump.open(path, FORMAT));
    }

    public Path source() {
        return files.source();
    }

    public JsonNode manifest() {
        return files.manifest();
    }

    /** "k3j 0.1.0 (float32)": the engine and the precision it ran in. */
    public String engine() {
        return files.field("engine", "name").asText() + " (" + files.field("engine", "precision").asText() + ")";
    }

    /** sha256 of the reference manifest whose inputs the candidate was fed. */
    public String referenceSha256() {
        return files.field("reference", "manifest_sha256").asText();
    }

    /**
     * Refuses a reference other than the one the candidate was made from, naming both; a reference written from
     * that one's inputs (a k3j-written reference's {@code inputs_from}) feeds the same bits and is accepted.
     */
    public void checkAgainst(ReferenceDump reference) {
        if (!referenceSha256().equals(reference.manifestSha256()) && !referenceSha256().equals(reference.inputsFromSha256())) {
            throw ReferenceDump.mismatch("the candidate " + source() + " was made from the reference with manifest sha256 " + referenceSha256()
                    + " (" + files.manifest().path("reference").path("dir").asText("?") + "), not from " + reference.source() + " (" + reference.manifestSha256() + ")");
        }
        checkClaims(reference);
        checkArrays(reference);
    }

    /**
     * What the candidate says it ran (its manifest's {@code reference.ids} and {@code reference.layer_map}) is the
     * reference's: a candidate run on another prompt or another layer map is refused by name, never judged.
     */
    private void checkClaims(ReferenceDump reference) {
        JsonNode claim = files.manifest().path("reference");
        JsonNode ids = claim.path("ids");
        if (!ids.isMissingNode() && !ids.isNull()) {
            int[] want = reference.ids();
            if (!ids.isArray()) throw ReferenceDump.mismatch("refused (invariant 2): " + source() + ": manifest reference.ids is not a list of ids");
            int k = 0;
            while (k < Math.min(ids.size(), want.length) && ids.get(k).isIntegralNumber() && ids.get(k).asLong() == want[k]) k++;
            if (k != ids.size() || k != want.length) {
                throw ReferenceDump.mismatch("refused (invariant 2): " + source() + " ran another prompt: its manifest's reference.ids (" + ids.size()
                        + " ids) differ from the reference's " + reference.promptId() + (k < Math.min(ids.size(), want.length) ? " at position " + k : " in length"));
            }
        }
        JsonNode map = claim.path("layer_map");
        if (!map.isMissingNode() && !map.isNull()) {
            String want = reference.field("layer_map").asText();
            if (!map.isTextual() || !map.asText().equals(want)) {
                throw ReferenceDump.mismatch("refused (invariant 2): " + source() + " ran another layer map: its manifest's reference.layer_map is " + map
                        + ", the reference's is \"" + want + "\"");
            }
        }
    }

    private static final java.util.regex.Pattern LAYER_KEY = java.util.regex.Pattern.compile("layers\\.(0|[1-9][0-9]{0,5})\\.([a-z_]+)");
    private static final java.util.Set<String> STATES = java.util.Set.of("kda_state", "q_conv_state", "k_conv_state", "v_conv_state");

    /**
     * Every array the candidate holds is a candidate key of docs/formats.md §9 with the reference's dtype and shape for
     * that key (the KDA states: the same length in any shape; logits: the reference's [T, V]; greedy_ids: [G]), so
     * a shape error is refused before any verdict, in a folder or a one-file candidate alike.
     */
    private void checkArrays(ReferenceDump reference) {
        List<String> problems = new java.util.ArrayList<>();
        java.util.Set<String> stages = new java.util.HashSet<>(Stage.NAMES);
        stages.add("moe_idx");
        stages.add(Stage.MOE_WEIGHT);
        files.manifest().path("arrays").properties().forEach(en -> {
            String key = en.getKey();
            String refKey;
            boolean anyShape = false;
            long[] want;
            String dtype = "F32";
            if (key.equals("logits") || key.equals("logits_incremental")) {
                refKey = "logits";
            } else if (key.equals("greedy_ids")) {
                refKey = null;
                dtype = "I32";
            } else {
                java.util.regex.Matcher m = LAYER_KEY.matcher(key);
                if (!m.matches() || !(stages.contains(m.group(2)) || STATES.contains(m.group(2)))) {
                    problems.add("'" + key + "' is not a candidate array (docs/formats.md section 9)");
                    return;
                }
                refKey = key;
                anyShape = STATES.contains(m.group(2));
                if (m.group(2).equals("moe_idx")) dtype = "I32";
            }
            if (refKey != null && !reference.has(refKey)) {
                problems.add("'" + key + "': the reference has no such array (another layer kind, or a layer it does not have)");
                return;
            }
            want = refKey == null ? new long[] {reference.generatedIds().length} : java.util.Arrays.stream(reference.shape(refKey)).asLongStream().toArray();
            JsonNode a = en.getValue();
            if (!dtype.equals(a.path("dtype").asText())) problems.add("'" + key + "' is " + a.path("dtype") + ", expected " + dtype);
            JsonNode shape = a.path("shape");
            long[] got = new long[shape.size()];
            for (int i = 0; i < got.length; i++) got[i] = shape.get(i).isIntegralNumber() ? shape.get(i).asLong() : -1;
            boolean ok = anyShape ? count(got) == count(want) : java.util.Arrays.equals(got, want);
            if (!ok) problems.add("'" + key + "' has shape " + shape + ", the reference's is " + java.util.Arrays.toString(want) + (anyShape ? " (any shape of that length)" : ""));
        });
        if (!problems.isEmpty()) {
            throw ReferenceDump.mismatch(source() + ": the candidate's arrays do not fit the reference (" + problems.size() + " problem(s)): "
                    + String.join("; ", problems.subList(0, Math.min(8, problems.size()))));
        }
    }

    private static long count(long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) return -1;
            n *= d;
        }
        return n;
    }

    /** The layers the candidate lists (its manifest.layers[]). */
    public int layerCount() {
        return files.field("layers").size();
    }

    /** The engine's error for a layer it could not run ("" when it ran, or the layer is not listed). */
    public String layerError(int i) {
        return entry(i).path("error").asText("");
    }

    /** Whether the candidate lists layer {@code i} at all. */
    public boolean lists(int i) {
        return !entry(i).isMissingNode();
    }

    /** The mixer the engine ran layer {@code i} as ("KDA" / "MLA"; "" when it does not say). */
    public String mixer(int i) {
        return entry(i).path("mixer").asText("").toUpperCase(java.util.Locale.ROOT);
    }

    /** The MLP the engine ran layer {@code i} with ("dense" / "moe"; "" when it does not say). */
    public String mlp(int i) {
        return entry(i).path("mlp").asText("");
    }

    private JsonNode entry(int i) {
        for (JsonNode l : files.field("layers")) if (l.path("index").asInt(-1) == i) return l;
        return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
    }

    /**
     * Layer {@code i}'s stages as the candidate holds them, null where absent (the comparison reports those as
     * missing). partialIn is not part of a candidate: it is the reference's own input.
     */
    public LayerStages stages(int i, int tokens) {
        String p = "layers." + i + ".";
        return new LayerStages(i, tokens, null, f32(p + "attn_in"), f32(p + "attn_norm"), f32(p + "attn_out"), f32(p + "partial_attn"),
                f32(p + "mlp_in"), f32(p + "mlp_norm"), f32(p + "mlp_out"), f32(p + "partial_out"),
                files.has(p + "moe_idx") ? files.i32(p + "moe_idx") : null, f32(p + "moe_weight"), kdaState(p), List.of());
    }

    /** The teacher-forced logits [T][V] over the reference's ids (full recompute, or incremental), or null when the engine wrote none. */
    public float[] logits(boolean incremental) {
        return f32(logitsKey(incremental));
    }

    /** "logits" (one forward over all ids) or "logits_incremental" (the prompt in one step, then one id at a time). */
    public static String logitsKey(boolean incremental) {
        return incremental ? "logits_incremental" : "logits";
    }

    /** The engine's greedy ids, or null when it wrote none. */
    public int[] greedyIds() {
        return files.has("greedy_ids") ? files.i32("greedy_ids") : null;
    }

    /** Why the logits are absent, when the candidate says ("" otherwise). */
    public String logitsNote() {
        return files.manifest().path("notes").path("logits").asText("");
    }

    /** A KDA layer's states after the call, when the candidate holds all four (else null: not judged). */
    private k3j.kernels.Layers.KdaState kdaState(String p) {
        float[] r = f32(p + "kda_state"), q = f32(p + "q_conv_state"), k = f32(p + "k_conv_state"), v = f32(p + "v_conv_state");
        return r == null || q == null || k == null || v == null ? null : new k3j.kernels.Layers.KdaState(r, q, k, v);
    }

    /** A float32 array of the candidate by key ("layers.5.attn_out"), or null when it does not hold it. */
    public float[] array(String key) {
        return f32(key);
    }

    private float[] f32(String key) {
        return files.has(key) ? files.f32(key) : null;
    }

    @Override
    public String toString() {
        return source().toString();
    }

    /**
     * Invariants 2 and 3: a candidate is read and checked the same way by every entry point before any of its values is
     * used: made from this reference (manifest sha256), holding only arrays the reference defines with its dtypes and
     * shapes, and listing only layers the reference has (index within 0..L-1). A layer listed with another mixer or MLP
     * than the reference's is judged where layers are judged ({@code conform}: that layer's [binding error]); a
     * comparison that judges the logits alone refuses it ({@link #requireReferenceLayers}).
     */
    public void requireFits(ReferenceDump reference) {
        checkAgainst(reference);
        int n = reference.layerCount();
        List<String> problems = new ArrayList<>();
        JsonNode layers = manifest().path("layers");
        for (int k = 0; k < layers.size(); k++) {
            long index = layers.get(k).path("index").asLong();
            if (index < 0 || index >= n) problems.add("layers[" + k + "].index " + index + " is outside the reference's 0.." + (n - 1));
        }
        refuse(problems);
    }

    /**
     * Invariant 3 for a comparison that judges no layer (compare-logits): a candidate whose manifest gives a layer another
     * mixer or MLP than the reference's ran another model; its logits are refused, not judged apart from the layer
     * {@code conform --candidate} fails.
     */
    public void requireReferenceLayers(ReferenceDump reference) {
        List<String> problems = new ArrayList<>();
        JsonNode layers = manifest().path("layers");
        for (int k = 0; k < layers.size(); k++) {
            JsonNode l = layers.get(k);
            int index = (int) l.path("index").asLong();
            ReferenceDump.LayerInfo info = reference.layer(index);
            String mixer = l.path("mixer").asText(""), mlp = l.path("mlp").asText("");
            if (!mixer.isEmpty() && !mixer.equalsIgnoreCase(info.mixer())) {
                problems.add("layer " + index + " ran as mixer '" + mixer + "', the reference's is '" + info.mixer().toLowerCase(Locale.ROOT) + "'");
            }
            if (!mlp.isEmpty() && !mlp.equals(info.mlp())) problems.add("layer " + index + " ran with mlp '" + mlp + "', the reference's is '" + info.mlp() + "'");
        }
        refuse(problems);
    }

    private void refuse(List<String> problems) {
        if (!problems.isEmpty()) {
            throw ReferenceDump.mismatch("refused (invariant 3): " + source() + ": the candidate's layers are not the reference's: "
                    + String.join("; ", problems.subList(0, Math.min(8, problems.size()))));
        }
    }
}
