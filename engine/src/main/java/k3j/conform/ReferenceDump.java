package k3j.conform;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.io.SafeFiles;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;
import org.apache.commons.compress.compressors.gzip.GzipCompressorInputStream;
import org.apache.commons.compress.compressors.xz.XZCompressorInputStream;

/**
 * A torch reference dump (reference-dumps/FORMAT.md, {@code k3ref-dump} v1): a directory, or the same
 * directory as {@code .tar.gz} / {@code .tar.xz} read in place (never unpacked to disk). The manifest is read
 * on open; arrays on demand, each checked against its shape's size and its sha256. An archive is scanned
 * once for the manifest and read whole (into memory) at the first array.
 *
 * <p>Every failure is a {@link ConformException} tagged {@link Finding#REFERENCE_MISMATCH}, naming the file.
 */
public final class ReferenceDump {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The manifest's {@code format} of a reference dump. */
    public static final String FORMAT = "k3ref-dump";
    /** Largest single array an archive may hold (one Java array). */
    private static final long MAX_ENTRY = Integer.MAX_VALUE - 16;
    /** Largest manifest read (the 93-layer oracle's is about 1 MB). */
    private static final long MAX_MANIFEST = 64L << 20;

    private final Path source;
    private final boolean archive;
    /** archive only: the folder inside the archive holding manifest.json ("" at the root) */
    private final String prefix;
    private final JsonNode manifest;
    private final String manifestSha256;
    private Map<String, byte[]> entries;

    private ReferenceDump(Path source, boolean archive, String prefix, byte[] manifestBytes, String format) throws IOException {
        this(source, archive, prefix, manifestBytes, format, null);
    }

    /** {@code table}: the arrays of a one-file candidate ({@link CandidateFile}), which its manifest must not list itself. */
    private ReferenceDump(Path source, boolean archive, String prefix, byte[] manifestBytes, String format,
                          com.fasterxml.jackson.databind.node.ObjectNode table) throws IOException {
        this.source = source;
        this.archive = archive;
        this.prefix = prefix;
        JsonNode m = JSON.readTree(manifestBytes);
        if (table != null) {
            if (!(m instanceof com.fasterxml.jackson.databind.node.ObjectNode o)) throw mismatch(source + ": the manifest is not a JSON object");
            if (o.has("arrays")) throw mismatch(source + ": a one-file candidate's arrays are its tensors: its manifest must not list 'arrays'");
            o.set("arrays", table);
        }
        this.manifest = m;
        this.manifestSha256 = sha256(manifestBytes);
        if (!format.equals(manifest.path("format").asText()) || manifest.path("format_version").asInt() != 1) {
            throw mismatch(source + ": not a " + format + " v1 (format '" + manifest.path("format").asText() + "', version "
                    + manifest.path("format_version") + ")");
        }
    }

    /** Opens a dump directory or a {@code .tar.gz} / {@code .tgz} / {@code .tar.xz} archive of one. */
    public static ReferenceDump open(Path path) {
        return open(path, FORMAT);
    }

    /**
     * The same container (manifest.json and raw arrays, a directory or an archive) holding another format: a
     * candidate dump ({@link CandidateDump}) is read through it.
     */
    static ReferenceDump open(Path path, String format) {
        if (!Files.exists(path)) throw mismatch("no reference dump at " + path);
        if (Files.isDirectory(path)) {
            Path m = path.resolve("manifest.json");
            if (!Files.exists(m)) throw mismatch(path + " holds no manifest.json: not a reference dump");
            try {
                return new ReferenceDump(path, false, "", SafeFiles.readAll(m, MAX_MANIFEST, "a dump manifest"), format);
            } catch (IOException e) {
                throw mismatch("cannot read " + m + ": " + SafeFiles.why(e));
            }
        }
        if (CandidateFile.isOneFile(path)) {
            if (!format.equals(CandidateDump.FORMAT)) throw mismatch(path + ": a reference dump is a folder, .tar.gz or .tar.xz; only a candidate may be one .safetensors or .npz file");
            CandidateFile.Contents c = CandidateFile.read(path);
            try {
                ReferenceDump d = new ReferenceDump(path, true, "", c.manifest(), format, CandidateFile.table(c));
                d.entries = CandidateFile.entries(c);
                return d;
            } catch (IOException e) {
                throw mismatch(path + ": the manifest is not JSON: " + SafeFiles.why(e));
            }
        }
        if (!isArchiveName(path)) throw mismatch(path + " is neither a dump directory nor a .tar.gz / .tar.xz archive");
        try {
            SafeFiles.requireRegular(path, "a dump archive");
        } catch (IOException e) {
            throw mismatch(SafeFiles.why(e));
        }
        try (TarArchiveInputStream tar = tar(path)) {
            for (TarArchiveEntry en; (en = tar.getNextEntry()) != null; ) {
                if (!en.isFile()) continue;
                String name = strip(en.getName());
                String prefix = manifestPrefix(name);
                if (prefix == null) continue;
                if (en.getSize() > MAX_MANIFEST) throw mismatch(path + ": " + name + " is " + en.getSize() + " bytes, too large for a manifest");
                return new ReferenceDump(path, true, prefix, tar.readNBytes((int) en.getSize()), format);
            }
        } catch (IOException e) {
            throw mismatch("cannot read the archive " + path + ": " + SafeFiles.why(e));
        }
        throw mismatch(path + ": no manifest.json at the archive root or under one top-level folder");
    }

    /** A name a dump archive may have. */
    public static boolean isArchiveName(Path p) {
        String n = p.getFileName().toString().toLowerCase(Locale.ROOT);
        return n.endsWith(".tar.gz") || n.endsWith(".tgz") || n.endsWith(".tar.xz") || n.endsWith(".txz");
    }

    /** "" for manifest.json, "dir/" for dir/manifest.json, null otherwise (deeper or another file). */
    private static String manifestPrefix(String name) {
        if (name.equals("manifest.json")) return "";
        int slash = name.indexOf('/');
        if (slash > 0 && name.substring(slash + 1).equals("manifest.json")) return name.substring(0, slash + 1);
        return null;
    }

    private static String strip(String name) {
        return name.startsWith("./") ? name.substring(2) : name;
    }

    private static TarArchiveInputStream tar(Path path) throws IOException {
        InputStream raw = new BufferedInputStream(Files.newInputStream(path), 1 << 16);
        String n = path.getFileName().toString().toLowerCase(Locale.ROOT);
        InputStream un = n.endsWith("xz") ? new XZCompressorInputStream(raw) : new GzipCompressorInputStream(raw);
        return new TarArchiveInputStream(un);
    }

    // ------------------------------------------------------------------ manifest

    /** Where the dump was read from (directory or archive). */
    public Path source() {
        return source;
    }

    public JsonNode manifest() {
        return manifest;
    }

    /** sha256 of the manifest.json bytes: how a candidate dump names the reference it was made from. */
    public String manifestSha256() {
        return manifestSha256;
    }

    /** A manifest field that must be present. */
    public JsonNode field(String... path) {
        JsonNode n = manifest;
        for (String p : path) {
            n = n.get(p);
            if (n == null || n.isNull()) throw mismatch(source + ": manifest has no " + String.join(".", path));
        }
        return n;
    }

    /** An int list of the manifest (prompt_ids, generated_ids, ids, boundaries). */
    public int[] ints(String name) {
        JsonNode a = field(name);
        if (!a.isArray()) throw mismatch(source + ": manifest " + name + " is not a list");
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; i++) {
            if (!a.get(i).canConvertToInt()) throw mismatch(source + ": manifest " + name + "[" + i + "] is not an int");
            v[i] = a.get(i).intValue();
        }
        return v;
    }

    public int[] promptIds() {
        return ints("prompt_ids");
    }

    public int[] generatedIds() {
        return ints("generated_ids");
    }

    /** prompt followed by generated: the teacher-forcing input (T ids). */
    public int[] ids() {
        return ints("ids");
    }

    public int layerCount() {
        return field("layers").size();
    }

    /** One entry of manifest.layers[]. */
    public LayerInfo layer(int i) {
        JsonNode l = field("layers").get(i);
        if (l == null || l.path("index").asInt(-1) != i) throw mismatch(source + ": manifest has no layers[" + i + "]");
        String mixer = need(l, "mixer", i).asText(), mlp = need(l, "mlp", i).asText();
        if (!mixer.equals("kda") && !mixer.equals("mla")) throw mismatch(source + ": layers[" + i + "].mixer is '" + mixer + "'");
        if (!mlp.equals("dense") && !mlp.equals("moe")) throw mismatch(source + ": layers[" + i + "].mlp is '" + mlp + "'");
        return new LayerInfo(i, mixer.equals("kda") ? "KDA" : "MLA", mlp, need(l, "boundary", i).asBoolean(),
                need(l, "snapshots_attn", i).asInt(), need(l, "snapshots_mlp", i).asInt());
    }

    private JsonNode need(JsonNode l, String key, int i) {
        JsonNode v = l.get(key);
        if (v == null || v.isNull()) throw mismatch(source + ": manifest layers[" + i + "] has no " + key);
        return v;
    }

    /** manifest.layers[i]: the mixer (KDA / MLA), the MLP (dense / moe) and how many snapshots each mix sees. */
    public record LayerInfo(int index, String mixer, String mlp, boolean boundary, int snapshotsAttn, int snapshotsMlp) {
        /** "KDA", "MLA", or "KDA dense" for a dense-MLP layer. */
        public String kind() {
            return mlp.equals("dense") ? mixer + " dense" : mixer;
        }
    }

    /** A model-level tolerance: the manifest's {@code tolerances.<what>.atol}. */
    public double atol(String what) {
        JsonNode t = manifest.path("tolerances").path(what).get("atol");
        if (t == null || !t.isNumber()) throw mismatch(source + ": manifest has no tolerances." + what + ".atol");
        return t.doubleValue();
    }

    /** A per-stage tolerance: {@code tolerances.layers[layer].stages.<stage>.<kind>} (kind atol_layer or atol_e2e). */
    public double atol(int layer, String stage, String kind) {
        JsonNode t = manifest.path("tolerances").path("layers").get(layer);
        JsonNode v = t == null ? null : t.path("stages").path(stage).get(kind);
        if (v == null || !v.isNumber()) throw mismatch(source + ": manifest has no tolerances.layers[" + layer + "].stages." + stage + "." + kind);
        return v.doubleValue();
    }

    /** The rounding budget of this dump (its manifest's constants; the defaults when it states none). */
    public Budget budget() {
        return Budget.of(this);
    }

    // ------------------------------------------------------------------ arrays

    public boolean has(String key) {
        return manifest.path("arrays").has(key);
    }

    public int[] shape(String key) {
        JsonNode s = array(key).path("shape");
        int[] v = new int[s.size()];
        for (int i = 0; i < v.length; i++) v[i] = s.get(i).intValue();
        return v;
    }

    public float[] f32(String key) {
        ByteBuffer b = bytes(key, "F32");
        float[] f = new float[b.remaining() / 4];
        b.asFloatBuffer().get(f);
        return f;
    }

    public int[] i32(String key) {
        ByteBuffer b = bytes(key, "I32");
        int[] v = new int[b.remaining() / 4];
        b.asIntBuffer().get(v);
        return v;
    }

    /** snapshots[0 : n], each [T][E]. */
    public List<float[]> snapshots(int n, int tokens, int hidden) {
        List<float[]> out = new ArrayList<>();
        if (n == 0) return out;
        float[] all = f32("snapshots");
        int size = tokens * hidden;
        if ((long) n * size > all.length) throw mismatch(source + ": snapshots holds " + all.length / Math.max(1, size) + " snapshots, " + n + " needed");
        for (int s = 0; s < n; s++) out.add(java.util.Arrays.copyOfRange(all, s * size, (s + 1) * size));
        return out;
    }

    private JsonNode array(String key) {
        JsonNode a = manifest.path("arrays").get(key);
        if (a == null) throw mismatch(source + ": array '" + key + "' is not in the manifest");
        return a;
    }

    private ByteBuffer bytes(String key, String dtype) {
        JsonNode a = array(key);
        if (!dtype.equals(a.path("dtype").asText())) throw mismatch(source + ": array '" + key + "' is " + a.path("dtype").asText() + ", expected " + dtype);
        long n = 4;
        for (int d : shape(key)) {
            if (d < 0) throw mismatch(source + ": array '" + key + "' has a negative dimension");
            n *= d;
        }
        if (n > MAX_ENTRY) throw mismatch(source + ": array '" + key + "' is " + n + " bytes, more than one Java array holds");
        String file = a.path("file").asText("");
        if (file.isEmpty() || file.contains("/") || file.contains("\\")) throw mismatch(source + ": array '" + key + "' names file '" + file + "'");
        byte[] b = read(file, n);
        if (b.length != n) throw mismatch(source + "/" + file + ": " + b.length + " bytes, shape " + a.path("shape") + " needs " + n);
        String sha = a.path("sha256").asText("");
        if (!SHA256.matcher(sha).matches()) throw mismatch(source + ": array '" + key + "' has no sha256 in the manifest: its bytes cannot be trusted");
        if (!sha.equals(sha256(b))) throw mismatch(source + "/" + file + ": sha256 differs from the manifest (corrupt or stale dump)");
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    private byte[] read(String file, long expected) {
        if (!archive) {
            Path p = source.resolve(file);
            try {
                long size = SafeFiles.requireRegular(p, "a dump array");
                if (size != expected) throw mismatch(p + ": " + size + " bytes, its manifest shape needs " + expected + " (truncated or stale)");
                return SafeFiles.readAll(p, expected, "a dump array");
            } catch (IOException e) {
                throw mismatch("cannot read " + p + ": " + SafeFiles.why(e));
            }
        }
        synchronized (this) {
            if (entries == null) entries = loadArchive();
        }
        byte[] b = entries.get(file);
        if (b == null) throw mismatch(source + ": the archive holds no " + prefix + file);
        return b;
    }

    private Map<String, byte[]> loadArchive() {
        Map<String, byte[]> m = new HashMap<>();
        try (TarArchiveInputStream tar = tar(source)) {
            for (TarArchiveEntry en; (en = tar.getNextEntry()) != null; ) {
                String name = strip(en.getName());
                if (!en.isFile() || !name.startsWith(prefix)) continue;
                String rest = name.substring(prefix.length());
                if (rest.contains("/") || !rest.endsWith(".bin")) continue;
                if (en.getSize() > MAX_ENTRY) throw mismatch(source + ": " + name + " is " + en.getSize() + " bytes, too large");
                byte[] b = tar.readNBytes((int) en.getSize());
                if (b.length != en.getSize()) throw mismatch(source + ": " + name + " ends after " + b.length + " of " + en.getSize() + " bytes: the archive is truncated");
                m.put(rest, b);
            }
        } catch (IOException e) {
            throw mismatch("cannot read the archive " + source + ": " + SafeFiles.why(e));
        }
        return m;
    }

    private static final java.util.regex.Pattern SHA256 = java.util.regex.Pattern.compile("[0-9a-f]{64}");

    /**
     * Refuses, before any verdict, a dump whose arrays are not exactly {@code layout}'s: an array missing or
     * unaccounted for, another dtype or shape, a {@code file} other than {@code key.bin}, no sha256, or a file
     * whose size is not its shape's (the bytes of each array are hashed when it is read; the
     * {@link DumpLayout.Use#UNUSED} ones are hashed here, since nothing reads them later).
     */
    public void checkArrays(DumpLayout layout) {
        JsonNode arrays = manifest.path("arrays");
        if (!arrays.isObject()) throw mismatch(source + ": manifest has no arrays object");
        List<String> problems = new ArrayList<>();
        arrays.fieldNames().forEachRemaining(k -> {
            // experts.* are the routed-expert probes the experts gate reads (reference-dumps/FORMAT.md): theirs to check
            if (!layout.arrays().containsKey(k) && !k.startsWith("experts.")) problems.add("array '" + k + "' is neither compared nor listed as unused for this config");
        });
        for (var en : layout.arrays().entrySet()) {
            String key = en.getKey();
            DumpLayout.Expected want = en.getValue();
            JsonNode a = arrays.get(key);
            if (a == null) {
                if (!want.optional()) problems.add("array '" + key + "' is missing (" + want.why() + ")");
                continue;
            }
            if (!want.dtype().equals(a.path("dtype").asText())) problems.add("array '" + key + "' is " + a.path("dtype") + ", expected " + want.dtype());
            JsonNode shape = a.path("shape");
            boolean sameShape = shape.isArray() && shape.size() == want.shape().length;
            for (int i = 0; sameShape && i < want.shape().length; i++) sameShape = shape.get(i).isIntegralNumber() && shape.get(i).asLong() == want.shape()[i];
            if (!sameShape) problems.add("array '" + key + "' has shape " + shape + ", the config and ids give " + want.shapeText());
            if (!(key + ".bin").equals(a.path("file").asText())) problems.add("array '" + key + "' names file " + a.path("file") + ", expected " + key + ".bin");
            if (!SHA256.matcher(a.path("sha256").asText("")).matches()) problems.add("array '" + key + "' has no sha256");
            if (problems.size() > 20) break;
        }
        if (!problems.isEmpty()) {
            throw mismatch(source + ": the manifest's arrays are not this model's (" + problems.size() + " problem(s)): " + String.join("; ", problems.subList(0, Math.min(problems.size(), 8))));
        }
        for (var en : layout.arrays().entrySet()) {
            String key = en.getKey(), file = key + ".bin";
            if (!arrays.has(key)) continue;   // an optional array left out (checked above)
            long size = size(file);
            if (size != en.getValue().bytes()) {
                throw mismatch(source + "/" + file + ": " + size + " bytes, its manifest shape needs " + en.getValue().bytes() + " (truncated or stale)");
            }
            if (en.getValue().use() == DumpLayout.Use.UNUSED) bytes(key, en.getValue().dtype());
        }
    }

    /** An array file's size, without reading it (a directory's file must be a regular file). */
    private long size(String file) {
        if (!archive) {
            try {
                return SafeFiles.requireRegular(source.resolve(file), "a dump array");
            } catch (IOException e) {
                throw mismatch("cannot read " + source.resolve(file) + ": " + SafeFiles.why(e));
            }
        }
        synchronized (this) {
            if (entries == null) entries = loadArchive();
        }
        byte[] b = entries.get(file);
        if (b == null) throw mismatch(source + ": the archive holds no " + prefix + file);
        return b.length;
    }

    static String sha256(byte[] b) {
        return HexFormat.of().formatHex(digest().digest(b));
    }

    static MessageDigest digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static ConformException mismatch(String message) {
        return new ConformException(Finding.REFERENCE_MISMATCH, message);
    }

    @Override
    public String toString() {
        return source.toString();
    }
}
