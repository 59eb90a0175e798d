package k3j.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import k3j.dump.ReferenceDump;

/**
 * A candidate dump (docs/formats.md §9) built from a reference's own arrays: as read, it is a perfect
 * float32 port of that reference. Tests change its arrays or manifest, then write it as a folder or an .npz, the
 * forms another engine writes; nothing about it is mocked: every reader and check runs on the written files.
 */
public final class CandidateFixture {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern CANDIDATE_KEY = Pattern.compile("layers\\.[0-9]+\\.(attn_in|attn_norm|attn_out|partial_attn|mlp_in|mlp_norm|mlp_out|partial_out"
            + "|moe_idx|moe_weight|kda_state|q_conv_state|k_conv_state|v_conv_state)");

    /** One array: "F32" or "I32", its shape, and its values (floats or ints). */
    public record Array(String dtype, long[] shape, float[] f32, int[] i32) {
        public Array copy() {
            return new Array(dtype, shape.clone(), f32 == null ? null : f32.clone(), i32 == null ? null : i32.clone());
        }
    }

    public final ReferenceDump reference;
    /** The arrays by key, in the order they are written. */
    public final Map<String, Array> arrays = new LinkedHashMap<>();
    /** The manifest without its {@code arrays} table (written from {@link #arrays}). */
    public final ObjectNode manifest;

    private CandidateFixture(ReferenceDump reference, ObjectNode manifest) {
        this.reference = reference;
        this.manifest = manifest;
    }

    private static final Map<ReferenceDump, CandidateFixture> PERFECT = new java.util.concurrent.ConcurrentHashMap<>();

    /** Every candidate array the reference holds, its logits as both logits arrays, its generated ids as the greedy ids (a fresh copy). */
    public static CandidateFixture perfect(ReferenceDump ref) {
        CandidateFixture base = PERFECT.computeIfAbsent(ref, CandidateFixture::read);
        CandidateFixture c = new CandidateFixture(ref, base.manifest.deepCopy());
        base.arrays.forEach((k, a) -> c.arrays.put(k, a.copy()));
        return c;
    }

    private static CandidateFixture read(ReferenceDump ref) {
        ObjectNode m = JSON.createObjectNode();
        m.put("format", "k3-candidate").put("format_version", 1).put("layer_inputs", "reference");
        m.putObject("engine").put("name", "candidate fixture").put("precision", "float32");
        m.putObject("reference").put("manifest_sha256", ref.manifestSha256()).put("dir", ref.source().toString());
        ArrayNode layers = m.putArray("layers");
        for (int i = 0; i < ref.layerCount(); i++) {
            ReferenceDump.LayerInfo l = ref.layer(i);
            layers.addObject().put("index", i).put("mixer", l.mixer().toLowerCase(java.util.Locale.ROOT)).put("mlp", l.mlp());
        }
        CandidateFixture c = new CandidateFixture(ref, m);
        ref.manifest().path("arrays").properties().forEach(en -> {
            String key = en.getKey();
            if (!CANDIDATE_KEY.matcher(key).matches() && !key.equals("logits")) return;
            long[] shape = java.util.Arrays.stream(ref.shape(key)).asLongStream().toArray();
            boolean ints = en.getValue().path("dtype").asText().equals("I32");
            c.arrays.put(key, ints ? new Array("I32", shape, null, ref.i32(key)) : new Array("F32", shape, ref.f32(key), null));
        });
        c.arrays.put("logits_incremental", c.arrays.get("logits").copy());
        int[] gen = ref.generatedIds();
        c.arrays.put("greedy_ids", new Array("I32", new long[] {gen.length}, null, gen.clone()));
        return c;
    }

    /** The float32 values of {@code key} (changed in place by a test). */
    public float[] f32(String key) {
        Array a = arrays.get(key);
        if (a == null || a.f32() == null) throw new IllegalArgumentException("the fixture holds no float32 array '" + key + "'");
        return a.f32();
    }

    private static byte[] bytes(Array a) {
        int n = a.f32() != null ? a.f32().length : a.i32().length;
        ByteBuffer b = ByteBuffer.allocate(4 * n).order(ByteOrder.LITTLE_ENDIAN);
        if (a.f32() != null) b.asFloatBuffer().put(a.f32());
        else b.asIntBuffer().put(a.i32());
        return b.array();
    }

    /** Writes the folder form: key.bin files and a manifest.json whose arrays table holds each file's dtype, shape and sha256. */
    public Path writeFolder(Path dir) throws IOException {
        Files.createDirectories(dir);
        ObjectNode m = manifest.deepCopy();
        ObjectNode table = m.putObject("arrays");
        for (var en : arrays.entrySet()) {
            byte[] b = bytes(en.getValue());
            Files.write(dir.resolve(en.getKey() + ".bin"), b);
            ObjectNode o = table.putObject(en.getKey());
            o.put("file", en.getKey() + ".bin").put("dtype", en.getValue().dtype());
            ArrayNode s = o.putArray("shape");
            for (long d : en.getValue().shape()) s.add(d);
            o.put("sha256", KernelFixtures.sha256(b));
        }
        JSON.writeValue(dir.resolve("manifest.json").toFile(), m);
        return dir;
    }

    /** Writes the one-file .npz form: manifest.json (without arrays) and one key.npy per array. */
    public Path writeNpz(Path file) throws IOException {
        try (OutputStream os = Files.newOutputStream(file); ZipOutputStream zip = new ZipOutputStream(os)) {
            stored(zip, "manifest.json", JSON.writeValueAsBytes(manifest));
            for (var en : arrays.entrySet()) stored(zip, en.getKey() + ".npy", npy(en.getValue()));
        }
        return file;
    }

    /** One entry stored uncompressed, as numpy.savez writes it. */
    private static void stored(ZipOutputStream zip, String name, byte[] b) throws IOException {
        ZipEntry e = new ZipEntry(name);
        e.setMethod(ZipEntry.STORED);
        e.setSize(b.length);
        java.util.zip.CRC32 crc = new java.util.zip.CRC32();
        crc.update(b);
        e.setCrc(crc.getValue());
        zip.putNextEntry(e);
        zip.write(b);
        zip.closeEntry();
    }

    /** A version 1.0 .npy of the array ('<f4' or '<i4', C order), its header padded to 64 bytes as numpy pads it. */
    public static byte[] npy(Array a) {
        StringBuilder shape = new StringBuilder("(");
        for (long d : a.shape()) shape.append(d).append(", ");
        if (a.shape().length > 1) shape.setLength(shape.length() - 2);
        else if (a.shape().length == 1) shape.setLength(shape.length() - 1);
        shape.append(")");
        String dict = "{'descr': '" + (a.f32() != null ? "<f4" : "<i4") + "', 'fortran_order': False, 'shape': " + shape + ", }";
        int total = 10 + dict.length() + 1;
        int pad = (64 - total % 64) % 64;
        String header = dict + " ".repeat(pad) + "\n";
        byte[] data = bytes(a);
        ByteBuffer b = ByteBuffer.allocate(10 + header.length() + data.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put((byte) 0x93).put("NUMPY".getBytes(StandardCharsets.US_ASCII)).put((byte) 1).put((byte) 0).putShort((short) header.length());
        b.put(header.getBytes(StandardCharsets.US_ASCII)).put(data);
        return b.array();
    }
}
