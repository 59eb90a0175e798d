package k3j.dump;

import com.fasterxml.jackson.databind.JsonNode;
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
import k3j.io.StrictJson;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveInputStream;
import org.apache.commons.compress.compressors.gzip.GzipCompressorInputStream;
import org.apache.commons.compress.compressors.xz.XZCompressorInputStream;

/**
 * A torch reference dump (docs/formats.md §7, {@code k3ref-dump} v1): a directory, or the same
 * directory as {@code .tar.gz} / {@code .tar.xz} read in place (never unpacked to disk). The manifest is read
 * on open; arrays on demand, each checked against its shape's size and its sha256. An archive is scanned
 * once for the manifest and read whole (into memory) at the first array.
 *
 * <p>Every failure is a {@link ConformException} tagged {@link Finding#REFERENCE_MISMATCH}, naming the file.
 */
public final class ReferenceDump {
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

    private ReferenceDump(Path source, boolean archive, String prefix, byte[] manifestBytes, String format) {
        this(source, archive, prefix, manifestBytes, format, null);
    }

    /** {@code table}: the arrays of a one-file candidate ({@link CandidateFile}), which its manifest must not list itself. */
    private ReferenceDump(Path source, boolean archive, String prefix, byte[] manifestBytes, String format,
                          com.fasterxml.jackson.databind.node.ObjectNode table) {
        this.source = source;
        this.archive = archive;
        this.prefix = prefix;
        try {
            JsonNode m = StrictJson.read(manifestBytes);
            if (table != null) {
                if (!(m instanceof com.fasterxml.jackson.databind.node.ObjectNode o)) throw mismatch(source + ": manifest.json is not a JSON object");
                if (o.has("arrays")) throw mismatch(source + ": a one-file candidate's arrays are its tensors: its manifest must not list 'arrays'");
                o.set("arrays", table);
            }
            this.manifest = m;
        } catch (IOException e) {
            String why = e instanceof com.fasterxml.jackson.core.JacksonException j ? j.getOriginalMessage() : SafeFiles.why(e);
            throw mismatch(source + ": manifest.json is not strict JSON (" + why + ")");
        }
        this.manifestSha256 = sha256(manifestBytes);
        if (manifest == null || !manifest.isObject()) throw mismatch(source + ": manifest.json is not a JSON object");
        String got = StrictJson.text(manifest, "format", where(), ReferenceDump::mismatch);
        long version = StrictJson.integer(manifest, "format_version", where(), ReferenceDump::mismatch);
        if (!format.equals(got) || version != 1) throw mismatch(source + ": not a " + format + " v1 (format '" + got + "', version " + version + ")");
        ReferenceManifest.checkArrayTypes(manifest, where());
        if (format.equals(FORMAT)) ReferenceManifest.checkReferenceTypes(manifest, where());
    }

    /** "DUMP: manifest", how messages name the manifest's root. */
    public String where() {
        return source + ": manifest";
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
        String what = format.equals(CandidateDump.FORMAT) ? "candidate dump" : "reference dump";
        if (!Files.exists(path)) throw mismatch("no " + what + " at " + path + ": no such file or folder");
        if (Files.isDirectory(path)) {
            Path m = path.resolve("manifest.json");
            if (!Files.exists(m)) throw mismatch(path + " holds no manifest.json: not a " + what);
            try {
                return new ReferenceDump(path, false, "", SafeFiles.readAll(m, MAX_MANIFEST, "a dump manifest"), format);
            } catch (IOException e) {
                throw mismatch("cannot read " + m + ": " + SafeFiles.why(e));
            }
        }
        if (CandidateFile.isOneFile(path)) {
            if (!format.equals(CandidateDump.FORMAT)) throw mismatch(path + ": a reference dump is a folder, .tar.gz or .tar.xz; only a candidate may be one .safetensors or .npz file");
            CandidateFile.Contents c = CandidateFile.read(path);
            ReferenceDump d = new ReferenceDump(path, true, "", c.manifest(), format, CandidateFile.table(c));
            d.entries = CandidateFile.entries(c);
            return d;
        }
        if (!isArchiveName(path)) throw mismatch(path + " is neither a dump directory nor a .tar.gz / .tar.xz archive");
        try {
            SafeFiles.requireRegular(path, "a dump archive");
        } catch (IOException e) {
            throw mismatch(SafeFiles.why(e));
        }
        // the whole archive is scanned: a second manifest.json (which `tar xf` would keep) is refused, not shadowed by the first
        String found = null, prefix = null;
        byte[] bytes = null;
        try (TarArchiveInputStream tar = tar(path)) {
            for (TarArchiveEntry en; (en = tar.getNextEntry()) != null; ) {
                if (!en.isFile()) continue;
                String name = strip(en.getName());
                String p = manifestPrefix(name);
                if (p == null) continue;
                if (found != null) {
                    throw mismatch(path + ": the archive holds two manifests (" + found + " and " + name + "); a dump archive holds exactly one");
                }
                if (en.getSize() > MAX_MANIFEST) throw mismatch(path + ": " + name + " is " + en.getSize() + " bytes, too large for a manifest");
                bytes = tar.readNBytes((int) en.getSize());
                if (bytes.length != en.getSize()) throw mismatch(path + ": " + name + " ends after " + bytes.length + " of " + en.getSize() + " bytes: the archive is truncated");
                found = name;
                prefix = p;
            }
        } catch (IOException e) {
            throw mismatch("cannot read the archive " + path + ": " + SafeFiles.why(e));
        }
        if (found == null) throw mismatch(path + ": no manifest.json at the archive root or under one top-level folder");
        return new ReferenceDump(path, true, prefix, bytes, format);
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
        InputStream raw = new BufferedInputStream(k3j.io.SafeFiles.newInputStream(path, "a reference dump archive"), 1 << 16);
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

    /**
     * Who computed the reference, as every verdict against it says: "reference: k3j VERSION (BUILD), not torch" for
     * a dump another engine wrote in this format (its manifest's {@code producer}), else the torch reference with the
     * generator its manifest names.
     */
    public String producer() {
        JsonNode p = manifest.path("producer");
        if (p.isObject() && !p.path("name").asText("").trim().equalsIgnoreCase("torch")) {
            return "reference: " + p.path("name").asText("?") + " " + p.path("version").asText("?")
                    + (p.has("build") ? " (" + p.path("build").asText() + ")" : "") + ", not torch";
        }
        JsonNode g = manifest.path("generator");
        return "reference: torch" + (g.has("torch") ? " " + g.path("torch").asText() : "") + (g.has("script") ? " (" + g.path("script").asText() + ")" : "");
    }

    /**
     * The manifest sha256 of the reference whose inputs this one copies ({@code inputs_from}, a reference another
     * engine wrote: docs/formats.md), or null for a reference computed from its own inputs.
     */
    public String inputsFromSha256() {
        JsonNode s = manifest.path("inputs_from").path("manifest_sha256");
        return s.isTextual() && SHA256.matcher(s.asText()).matches() ? s.asText() : null;
    }

    /** Whether torch computed this reference (no {@code producer}, or one named "torch"). */
    public boolean torch() {
        JsonNode p = manifest.path("producer");
        return !p.isObject() || p.path("name").asText("").trim().equalsIgnoreCase("torch");
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
        return StrictJson.ints(manifest, name, where(), ReferenceDump::mismatch);
    }

    public int[] promptIds() {
        return ints("prompt_ids");
    }

    public int[] generatedIds() {
        return ints("generated_ids");
    }

    /** The prompt a verdict names: "N ids sha256:HEX16" over the teacher-forcing ids ({@link #ids()}), little-endian int32. */
    public String promptId() {
        int[] ids = ids();
        java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(ids.length * 4).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        for (int id : ids) b.putInt(id);
        try {
            byte[] h = java.security.MessageDigest.getInstance("SHA-256").digest(b.array());
            return ids.length + " ids sha256:" + java.util.HexFormat.of().formatHex(h, 0, 8);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
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

    /**
     * How many budgets an end-to-end tolerance may span: drift accumulates over the layers of a whole-model run (up to
     * ~20 budgets on the 93-layer oracle), but a tolerance at or past the line where the harness calls a difference a
     * binding error ({@link Finding#BINDING_RATIO}) would accept one.
     */
    static final double E2E_BUDGETS = Finding.BINDING_RATIO;

    /** A model-level tolerance: the manifest's {@code tolerances.<what>.atol} (whole-model runs), within the harness's bound. */
    public double atol(String what) {
        JsonNode t = manifest.path("tolerances").path(what).get("atol");
        if (t == null || !t.isNumber()) throw mismatch(source + ": manifest has no tolerances." + what + ".atol");
        return bounded(t.doubleValue(), "tolerances." + what + ".atol", what, E2E_BUDGETS);
    }

    /**
     * A per-stage tolerance: {@code tolerances.layers[layer].stages.<stage>.<kind>} (kind atol_layer or atol_e2e),
     * within the harness's bound: a layer run alone may not loosen the budget rule, a whole-model run may not reach the
     * binding-error line ({@link #E2E_BUDGETS}).
     */
    public double atol(int layer, String stage, String kind) {
        JsonNode t = manifest.path("tolerances").path("layers").get(layer);
        JsonNode v = t == null ? null : t.path("stages").path(stage).get(kind);
        String key = "tolerances.layers[" + layer + "].stages." + stage + "." + kind;
        if (v == null || !v.isNumber()) throw mismatch(source + ": manifest has no " + key);
        return bounded(v.doubleValue(), key, "layers." + layer + "." + stage, kind.equals("atol_layer") ? 1 : E2E_BUDGETS);
    }

    /**
     * A dump's absolute tolerance for {@code array}, refused naming {@code key} unless it is positive, finite and at most
     * {@code budgets} × the budget rule (eps32 · sqrt(width) · factor, the harness's constants or tighter ones) × max|array|.
     * The width is the compared vector's length: the array's last dimension, the hidden size for a recurrent or cached state.
     */
    private double bounded(double atol, String key, String array, double budgets) {
        if (!(atol > 0) || !Double.isFinite(atol)) throw mismatch(source + ": manifest " + key + " = " + atol + " is not a positive finite number");
        boolean state = array.endsWith("_state") || array.endsWith(".mla_kv") || array.endsWith(".mla_rope");
        int[] shape = shape(state ? "final_mix" : array);
        double ceiling = budgets * budget().ofWidth(shape[shape.length - 1]) * Budget.absMax(f32(array));
        if (atol > ceiling * (1 + 1e-9)) {
            throw mismatch(String.format(Locale.ROOT, "%s: manifest %s = %.6g is looser than the harness's own bound %.6g (%s eps32 * sqrt(width) * factor * max|ref|);"
                    + " a dump may only tighten a tolerance", source, key, atol, ceiling, budgets == 1 ? "" : (int) budgets + " x"));
        }
        return atol;
    }

    private volatile Budget budget;

    /**
     * The rounding budget of this dump, opened and checked in this one place for every path (conform, compare-logits,
     * --against, the API, the gates): its manifest's constants (the defaults when it states none), and every width it
     * states equal to the width derived from its own config (docs/semantics.md §10.11, invariant 6), else refused.
     */
    public Budget budget() {
        Budget b = budget;
        if (b == null) {
            b = Budget.of(this);
            k3j.config.ModelConfig config;
            try {
                config = k3j.config.ConfigReader.read(field("config"), source + " manifest config");
            } catch (k3j.config.ConfigException e) {
                throw mismatch(source + ": the manifest's config cannot give the budget's widths: " + e.getMessage());
            }
            b.check(config, source.toString());
            budget = b;
        }
        return b;
    }

    // ------------------------------------------------------------------ arrays

    public boolean has(String key) {
        return manifest.path("arrays").has(key);
    }

    public int[] shape(String key) {
        return StrictJson.ints(array(key), "shape", where() + " arrays." + key, ReferenceDump::mismatch);
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
                if (m.put(rest, b) != null) throw mismatch(source + ": the archive holds " + name + " twice; which copy is the dump's is ambiguous");
            }
        } catch (IOException e) {
            throw mismatch("cannot read the archive " + source + ": " + SafeFiles.why(e));
        }
        return m;
    }

    static final java.util.regex.Pattern SHA256 = java.util.regex.Pattern.compile("[0-9a-f]{64}");

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
            // experts.* are the routed-expert probes the experts gate reads (docs/formats.md §7.10): theirs to check
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

    public static String sha256(byte[] b) {
        return HexFormat.of().formatHex(digest().digest(b));
    }

    static MessageDigest digest() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    public static ConformException mismatch(String message) {
        return new ConformException(Finding.REFERENCE_MISMATCH, message);
    }

    @Override
    public String toString() {
        return source.toString();
    }
}
