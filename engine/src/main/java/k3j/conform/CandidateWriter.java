package k3j.conform;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.model.LayerStages;

/**
 * Writes k3j's own activations as a candidate dump (reference-dumps/FORMAT.md §9): every layer run alone from
 * the reference's inputs, exactly what {@link Conformance#layer(int)} compares, the full-recompute logits over
 * the reference's ids and the greedy ids. Judging this dump with {@code k3 conform --candidate} gives the
 * verdicts of {@code k3 conform} on the model itself.
 */
public final class CandidateWriter {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final Path dir;
    private final Map<String, Object> arrays = new LinkedHashMap<>();

    private CandidateWriter(Path dir) {
        this.dir = dir;
    }

    /**
     * Runs every layer of {@code c} (a k3j forward against its reference) and writes the candidate into
     * {@code dir} whole (docs/files.md: written into a temporary folder beside it and renamed into place when
     * complete; an existing folder must be empty or hold a candidate, which is replaced).
     *
     * @return the number of layers that ran
     */
    public static int write(Conformance c, Path dir, String engine) throws IOException {
        if (c.candidateDump() != null) throw new IllegalArgumentException("a candidate is written from a k3j forward, not from another candidate");
        int[] ran = {0};
        k3j.io.AtomicWrite.folder(dir, "--dump-activations", CandidateWriter::isCandidate, tmp -> ran[0] = writeInto(c, tmp, engine));
        return ran[0];
    }

    private static int writeInto(Conformance c, Path dir, String engine) throws IOException {
        CandidateWriter w = new CandidateWriter(dir);
        ReferenceDump ref = c.dump();
        int tokens = c.tokens(), ran = 0;
        List<Map<String, Object>> layers = new ArrayList<>();
        for (int i = 0; i < c.layerCount(); i++) {
            ReferenceDump.LayerInfo info = ref.layer(i);
            Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("index", i);
            entry.put("mixer", info.mixer().toLowerCase(java.util.Locale.ROOT));
            entry.put("mlp", info.mlp());
            switch (c.run(i)) {
                case LayerRun.Ran r -> {
                    LayerStages st = r.stages();
                    String p = "layers." + i + ".";
                    for (Stage s : Stage.values()) w.f32(p + s.dumpName(), s.of(st), tokens);
                    if (st.moeIdx() != null) {
                        w.i32(p + "moe_idx", st.moeIdx(), tokens);
                        w.f32(p + Stage.MOE_WEIGHT, st.moeWeight(), tokens);
                    }
                    if (st.kdaState() != null) {   // the states after the layer, compared like the reference's
                        w.f32(p + "kda_state", st.kdaState().recurrent(), 1);
                        w.f32(p + "q_conv_state", st.kdaState().qConv(), 1);
                        w.f32(p + "k_conv_state", st.kdaState().kConv(), 1);
                        w.f32(p + "v_conv_state", st.kdaState().vConv(), 1);
                    }
                    ran++;
                }
                case LayerRun.Failed f -> entry.put("error", f.report().message());
            }
            layers.add(entry);
        }
        Map<String, Object> notes = new LinkedHashMap<>();
        if (c.forward() != null) {
            w.f32("logits", c.engineLogits(false), tokens);
            w.f32("logits_incremental", c.engineLogits(true), tokens);
            int[] gen = c.greedy().engine();
            w.i32("greedy_ids", gen, 1);
        } else {
            notes.put("logits", "not written: the model does not bind");
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", CandidateDump.FORMAT);
        m.put("format_version", 1);
        m.put("engine", Map.of("name", engine, "precision", "float32"));
        Map<String, Object> reference = new LinkedHashMap<>();
        reference.put("dir", ref.source().toString());
        reference.put("manifest_sha256", ref.manifestSha256());
        reference.put("ids", c.dump().ids());
        reference.put("layer_map", ref.field("layer_map").asText());
        m.put("reference", reference);
        m.put("layer_inputs", "reference");
        m.put("layers", layers);
        if (!notes.isEmpty()) m.put("notes", notes);
        m.put("arrays", w.arrays);
        JSON.writeValue(dir.resolve("manifest.json").toFile(), m);
        return ran;
    }

    /** Whether {@code dir} holds a candidate dump (which a new one may replace): its manifest names the candidate format. */
    private static boolean isCandidate(Path dir) {
        try {
            byte[] m = k3j.io.SafeFiles.readAll(dir.resolve("manifest.json"), 64L << 20, "a candidate manifest");
            return CandidateDump.FORMAT.equals(JSON.readTree(m).path("format").asText());
        } catch (IOException e) {
            return false;
        }
    }

    /** {@code values} as F32 [rows][values/rows]. */
    private void f32(String key, float[] values, int rows) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        put(key, "F32", b.array(), rows, values.length);
    }

    private void i32(String key, int[] values, int rows) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(values.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asIntBuffer().put(values);
        put(key, "I32", b.array(), rows, values.length);
    }

    private void put(String key, String dtype, byte[] bytes, int rows, int count) throws IOException {
        if (count % rows != 0) throw new IllegalArgumentException(key + ": " + count + " values do not make " + rows + " rows");
        String file = key + ".bin";
        Files.write(dir.resolve(file), bytes);
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("file", file);
        a.put("dtype", dtype);
        a.put("shape", rows == 1 ? List.of(count) : List.of(rows, count / rows));
        a.put("sha256", ReferenceDump.sha256(bytes));
        arrays.put(key, a);
    }
}
