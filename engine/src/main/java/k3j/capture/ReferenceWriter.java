package k3j.capture;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.compare.Conformance;
import k3j.compare.LayerRun;
import k3j.dump.CandidateDump;
import k3j.dump.ReferenceDump;
import k3j.dump.Stage;
import k3j.model.LayerStages;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * Writes k3j's own results in the reference format ({@code k3ref-dump} v1, docs/formats.md "A k3j-written
 * reference"): another engine's dump to judge candidates against. The inputs are the source reference's bits
 * (ids, snapshots, every layer's partial_in, the moe_choice scores the near-tie rule reads, and the unjudged
 * final_mix/final_norm), so a candidate made from the source is fed exactly what it would be fed from this one;
 * every judged array (each layer's stages, moe_idx, moe_weight and KDA states, the logits, the greedy ids) is
 * k3j's float32 result. The manifest's {@code producer} names k3j, its version and build and the FP contract,
 * and {@code inputs_from} the source (by manifest sha256), which is what lets a candidate made from the source
 * be judged against this dump ({@link CandidateDump#checkAgainst}).
 */
public final class ReferenceWriter {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    /** The source's arrays copied bit for bit: the layer inputs, and what no verdict judges. */
    static final List<String> COPIED = List.of("ids", "snapshots", "partial_in", "moe_choice", "final_mix", "final_norm");

    /** Who wrote a reference: name, version, build, and the FP contract its floats obey. */
    public record Producer(String name, String version, String build, String fpContract) {}

    private final Map<String, Object> arrays = new LinkedHashMap<>();
    private final Map<String, byte[]> data = new LinkedHashMap<>();

    private ReferenceWriter() {}

    /**
     * Runs every layer of {@code c} (a k3j forward against its source reference), the full-recompute logits and
     * the greedy ids, and writes the reference into {@code dir} whole (written into a temporary folder beside it,
     * renamed into place when complete; an existing folder must be empty or hold a k3j-written reference).
     * Refused (ConformException) when a layer fails or k3j's greedy ids differ from the source's generated ids
     * (the teacher-forcing ids would then not be this engine's).
     */
    public static void write(Conformance c, Path dir, Producer producer) throws IOException {
        if (c.candidateDump() != null || c.forward() == null) throw new IllegalArgumentException("a reference is written from a k3j forward of a model that binds");
        k3j.io.AtomicWrite.checkFolder(dir, "--dump-reference", ReferenceWriter::isK3jReference);
        ReferenceDump src = c.dump();
        ReferenceWriter w = new ReferenceWriter();
        Map<Integer, LayerStages> stages = new LinkedHashMap<>();
        for (int i = 0; i < c.layerCount(); i++) {
            switch (c.run(i)) {
                case LayerRun.Ran r -> stages.put(i, r.stages());
                case LayerRun.Failed f -> throw new ConformException(Finding.MISSING_STAGE, "layer " + i + " did not run: " + f.report().message());
            }
        }
        float[] logits = c.engineLogits(false);
        int[] greedy = c.greedy().engine();
        if (!Arrays.equals(greedy, src.generatedIds())) {
            throw new ConformException(Finding.REFERENCE_MISMATCH, "k3j's greedy ids " + Arrays.toString(greedy).replace(" ", "") + " differ from the source's generated ids "
                    + Arrays.toString(src.generatedIds()).replace(" ", "") + ": its teacher-forcing ids would not be k3j's");
        }
        JsonNode srcArrays = src.field("arrays");
        for (var it = srcArrays.fieldNames(); it.hasNext(); ) {
            String key = it.next();
            int[] shape = src.shape(key);
            String dtype = srcArrays.get(key).path("dtype").asText();
            if (key.startsWith("experts.")) continue;   // the expert sweep's probes and float64 sketches: not written (no "experts" entry)
            if (copied(key)) {
                if (dtype.equals("I32")) w.i32(key, src.i32(key), shape);
                else w.f32(key, src.f32(key), shape);
                continue;
            }
            switch (key) {
                case "logits" -> w.f32(key, logits, shape);
                case "greedy_ids" -> w.i32(key, greedy, shape);
                default -> {
                    String[] parts = key.split("\\.", 3);
                    if (parts.length != 3 || !parts[0].equals("layers")) throw new ConformException(Finding.REFERENCE_MISMATCH, src.source() + ": array '" + key + "' is not one k3j writes");
                    float[] v = layerArray(stages.get(Integer.parseInt(parts[1])), parts[2]);
                    int[] iv = parts[2].equals("moe_idx") ? stages.get(Integer.parseInt(parts[1])).moeIdx() : null;
                    if (iv != null) w.i32(key, iv, shape);
                    else if (v != null) w.f32(key, v, shape);
                    // else an optional array k3j does not return from a layer run alone (mla_kv, mla_rope): not written
                }
            }
        }
        if (w.data.size() < 4) throw new ConformException(Finding.REFERENCE_MISMATCH, src.source() + ": no arrays to write");
        ObjectNode m = ((ObjectNode) src.manifest()).deepCopy();
        for (String drop : List.of("generator", "self_checks", "robustness", "mutants", "experts")) m.remove(drop);
        ObjectNode p = m.putObject("producer");
        p.put("name", producer.name());
        p.put("version", producer.version());
        p.put("build", producer.build());
        p.put("fp_contract", producer.fpContract());
        ObjectNode precision = m.putObject("precision");
        precision.put("reference", "float32");
        precision.put("stored_floats", "F32 (k3j's float32 result, docs/fp-contract.md)");
        ObjectNode from = m.putObject("inputs_from");
        from.put("dir", src.source().toString());
        from.put("manifest_sha256", src.manifestSha256());
        from.put("producer", src.producer());
        from.put("copied", "ids, snapshots, layers.*.partial_in, layers.*.moe_choice, final_mix, final_norm: the source's bits; every other array is k3j's");
        m.set("arrays", JSON.valueToTree(w.arrays));
        k3j.io.AtomicWrite.folder(dir, "--dump-reference", ReferenceWriter::isK3jReference, tmp -> {
            for (var en : w.data.entrySet()) k3j.io.AtomicWrite.create(tmp.resolve(en.getKey() + ".bin"), en.getValue());
            JSON.writeValue(tmp.resolve("manifest.json").toFile(), m);
        });
    }

    /** Whether a source array is copied: the ids, the snapshots, and the per-layer inputs named in {@link #COPIED}. */
    static boolean copied(String key) {
        if (COPIED.contains(key)) return true;
        int dot = key.lastIndexOf('.');
        return key.startsWith("layers.") && COPIED.contains(key.substring(dot + 1));
    }

    /** k3j's value of one per-layer array, or null when a layer run alone does not return it. */
    private static float[] layerArray(LayerStages st, String name) {
        for (Stage s : Stage.values()) if (s.dumpName().equals(name)) return s.of(st);
        return switch (name) {
            case Stage.MOE_WEIGHT -> st.moeWeight();
            case "kda_state" -> st.kdaState() == null ? null : st.kdaState().recurrent();
            case "q_conv_state" -> st.kdaState() == null ? null : st.kdaState().qConv();
            case "k_conv_state" -> st.kdaState() == null ? null : st.kdaState().kConv();
            case "v_conv_state" -> st.kdaState() == null ? null : st.kdaState().vConv();
            case "moe_idx" -> null;
            default -> null;
        };
    }

    /** Whether {@code dir} holds a reference k3j wrote (which a new one may replace): its manifest names a producer 'k3j'. */
    static boolean isK3jReference(Path dir) {
        try {
            byte[] m = k3j.io.SafeFiles.readAll(dir.resolve("manifest.json"), 64L << 20, "a reference manifest");
            JsonNode j = JSON.readTree(m);
            return ReferenceDump.FORMAT.equals(j.path("format").asText()) && "k3j".equals(j.path("producer").path("name").asText());
        } catch (IOException e) {
            return false;
        }
    }

    private void f32(String key, float[] values, int[] shape) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        put(key, "F32", b.array(), shape, values.length);
    }

    private void i32(String key, int[] values, int[] shape) {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(values);
        put(key, "I32", b.array(), shape, values.length);
    }

    private void put(String key, String dtype, byte[] bytes, int[] shape, int count) {
        long n = 1;
        for (int d : shape) n *= d;
        if (n != count) throw new ConformException(Finding.REFERENCE_MISMATCH, key + ": k3j computed " + count + " values, the source's shape " + Arrays.toString(shape) + " holds " + n);
        data.put(key, bytes);
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("file", key + ".bin");
        a.put("dtype", dtype);
        a.put("shape", shape);
        a.put("sha256", ReferenceDump.sha256(bytes));
        arrays.put(key, a);
    }
}
