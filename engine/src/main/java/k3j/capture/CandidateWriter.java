package k3j.capture;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.compare.Conformance;
import k3j.compare.LayerRun;
import k3j.dump.CandidateDump;
import k3j.dump.CandidateFile;
import k3j.dump.ReferenceDump;
import k3j.dump.Stage;
import k3j.model.LayerStages;

/**
 * Writes k3j's own activations as a candidate dump (docs/formats.md §9): every layer run alone from
 * the reference's inputs, exactly what {@link Conformance#layer(int)} compares, the full-recompute logits over
 * the reference's ids and the greedy ids. Judging this dump with {@code k3 conform --candidate} gives the
 * verdicts of {@code k3 conform} on the model itself.
 */
public final class CandidateWriter {
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final Map<String, Object> arrays = new LinkedHashMap<>();
    /** every array's dtype, shape and bytes, written at the end (a folder's files, or one file) */
    private final Map<String, CandidateFile.Array> data = new LinkedHashMap<>();

    private CandidateWriter() {}

    /**
     * Runs every layer of {@code c} (a k3j forward against its reference) and writes the candidate into
     * {@code dir} whole (docs/files.md: written into a temporary folder beside it and renamed into place when
     * complete; an existing folder must be empty or hold a candidate, which is replaced), or, when
     * {@code dir} ends in {@code .safetensors} or {@code .npz}, as that one file (docs/formats.md, one-file candidates).
     *
     * @return the number of layers that ran
     */
    public static int write(Conformance c, Path dir, String engine) throws IOException {
        if (c.candidateDump() != null) throw new IllegalArgumentException("a candidate is written from a k3j forward, not from another candidate");
        boolean oneFile = CandidateFile.isOneFile(dir);
        if (oneFile) k3j.io.AtomicWrite.checkTarget(dir, "--dump-activations");
        else k3j.io.AtomicWrite.checkFolder(dir, "--dump-activations", CandidateWriter::isCandidate);
        CandidateWriter w = new CandidateWriter();
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
                    if (st.kdaState() != null) {   // the states after the layer, compared like the reference's: only those it holds (the scale dump has none)
                        if (ref.has(p + "kda_state")) w.f32(p + "kda_state", st.kdaState().recurrent(), 1);
                        if (ref.has(p + "q_conv_state")) w.f32(p + "q_conv_state", st.kdaState().qConv(), 1);
                        if (ref.has(p + "k_conv_state")) w.f32(p + "k_conv_state", st.kdaState().kConv(), 1);
                        if (ref.has(p + "v_conv_state")) w.f32(p + "v_conv_state", st.kdaState().vConv(), 1);
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
        if (oneFile) {
            byte[] manifest = JSON.writeValueAsBytes(m);
            if (dir.getFileName().toString().toLowerCase(java.util.Locale.ROOT).endsWith(".npz")) k3j.io.AtomicWrite.write(dir, "--dump-activations", out -> npz(out, manifest, w.data));
            else k3j.io.AtomicWrite.write(dir, "--dump-activations", out -> safetensors(out, manifest, w.data));
            return ran;
        }
        m.put("arrays", w.arrays);
        k3j.io.AtomicWrite.folder(dir, "--dump-activations", CandidateWriter::isCandidate, tmp -> {
            for (var en : w.data.entrySet()) k3j.io.AtomicWrite.create(tmp.resolve(en.getKey() + ".bin"), en.getValue().bytes());
            JSON.writeValue(tmp.resolve("manifest.json").toFile(), m);
        });
        return ran;
    }

    /** The safetensors form: the header's __metadata__ "manifest.json" holds the manifest text; the tensors tile the data section. */
    static void safetensors(java.io.OutputStream out, byte[] manifest, Map<String, CandidateFile.Array> data) throws IOException {
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("__metadata__", Map.of(CandidateFile.MANIFEST, new String(manifest, java.nio.charset.StandardCharsets.UTF_8)));
        long off = 0;
        for (var en : data.entrySet()) {
            CandidateFile.Array a = en.getValue();
            header.put(en.getKey(), Map.of("dtype", a.dtype(), "shape", a.shape(), "data_offsets", List.of(off, off + a.bytes().length)));
            off += a.bytes().length;
        }
        byte[] h = new ObjectMapper().writeValueAsBytes(header);
        int pad = (8 - h.length % 8) % 8;
        ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(h.length + pad);
        out.write(len.array());
        out.write(h);
        for (int i = 0; i < pad; i++) out.write(' ');
        for (CandidateFile.Array a : data.values()) out.write(a.bytes());
    }

    /** The npz form: manifest.json and one {@code <key>.npy} (version 1.0, '<f4' or '<i4', C order) per array, stored. */
    static void npz(java.io.OutputStream out, byte[] manifest, Map<String, CandidateFile.Array> data) throws IOException {
        java.util.zip.ZipOutputStream zip = new java.util.zip.ZipOutputStream(out);
        zip.setLevel(0);
        zip.putNextEntry(new java.util.zip.ZipEntry(CandidateFile.MANIFEST));
        zip.write(manifest);
        zip.closeEntry();
        for (var en : data.entrySet()) {
            CandidateFile.Array a = en.getValue();
            String shape = a.shape().length == 1 ? "(" + a.shape()[0] + ",)"
                    : "(" + String.join(", ", java.util.Arrays.stream(a.shape()).mapToObj(Long::toString).toList()) + ")";
            String dict = "{'descr': '" + (a.dtype().equals("F32") ? "<f4" : "<i4") + "', 'fortran_order': False, 'shape': " + shape + ", }";
            int total = 10 + dict.length() + 1;
            int pad = (64 - total % 64) % 64;
            byte[] head = (dict + " ".repeat(pad) + "\n").getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
            ByteBuffer pre = ByteBuffer.allocate(10).order(ByteOrder.LITTLE_ENDIAN);
            pre.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}).putShort((short) head.length);
            zip.putNextEntry(new java.util.zip.ZipEntry(en.getKey() + ".npy"));
            zip.write(pre.array());
            zip.write(head);
            zip.write(a.bytes());
            zip.closeEntry();
        }
        zip.finish();
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
        long[] shape = rows == 1 ? new long[] {count} : new long[] {rows, count / rows};
        data.put(key, new CandidateFile.Array(dtype, shape, bytes));
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("file", file);
        a.put("dtype", dtype);
        a.put("shape", rows == 1 ? List.of(count) : List.of(rows, count / rows));
        a.put("sha256", ReferenceDump.sha256(bytes));
        arrays.put(key, a);
    }
}
