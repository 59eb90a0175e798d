package k3j.dump;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * Which reference dump belongs to which weights. A dump records the checkpoint it was made from
 * ({@code manifest.checkpoint.files[]}: name, size, and for every shard the sha256 of its safetensors header);
 * a model matches when it has exactly the dump's shards with the same sizes and header hashes, and a
 * config.json equal (as JSON) to the dump's {@code config}. That reads a few MB of headers, never the 1.56 TB
 * of data; {@link #verifyData} hashes everything when asked.
 */
public final class ReferenceMatch {
    private static final ObjectMapper JSON = new ObjectMapper();

    private ReferenceMatch() {}

    /** How a command names a reference dump; the API names its own option in this one's place. */
    public static final String NAME_IT = "--reference / -Dk3.reference";

    /**
     * The folders every entry point (the commands, the API, the gates) searches for a reference dump when none is named:
     * {@code extra}, ./reference-dumps, and the reference-dumps/ of the repository the jar was built in.
     */
    public static List<Path> searchDirs(List<Path> extra) {
        LinkedHashSet<Path> s = new LinkedHashSet<>(extra);
        s.add(Path.of("reference-dumps"));
        try {
            Path jar = Path.of(ReferenceMatch.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            for (Path p = jar.getParent(); p != null; p = p.getParent()) {
                if (Files.isDirectory(p.resolve("reference-dumps"))) {
                    s.add(p.resolve("reference-dumps"));
                    break;
                }
            }
        } catch (java.net.URISyntaxException | SecurityException | IllegalArgumentException | NullPointerException e) {
            // no code source (an unusual class loader): the other folders still count
        }
        return List.copyOf(s);
    }

    /** Throws {@link ConformException} ({@link Finding#REFERENCE_MISMATCH}) naming the first file that differs. */
    public static void check(ReferenceDump dump, Path modelDir) {
        String why = mismatch(dump, modelDir, true);
        if (why != null) throw new ConformException(Finding.REFERENCE_MISMATCH, "the reference dump " + dump.source() + " was made for other weights than " + modelDir + ": " + why);
    }

    /**
     * The dump to use: {@code explicit} when given (checked), else the first dump among the candidates that
     * matches — every dump directory (holding a manifest.json) or archive named like a dump
     * ({@link #namedLikeADump}) in {@code searchDirs}, inside the model directory and next to it.
     */
    public static ReferenceDump locate(Path modelDir, Path explicit, List<Path> searchDirs) {
        if (explicit != null) {
            ReferenceDump d = ReferenceDump.open(explicit);
            check(d, modelDir);
            return d;
        }
        Set<Path> dirs = new LinkedHashSet<>();
        for (Path s : searchDirs) dirs.add(s.toAbsolutePath().normalize());
        Path model = modelDir.toAbsolutePath().normalize();
        dirs.add(model);
        if (model.getParent() != null) dirs.add(model.getParent());
        List<String> refused = new ArrayList<>();
        for (Path dir : dirs) {
            for (Path candidate : candidates(dir, model)) {
                ReferenceDump d;
                try {
                    d = ReferenceDump.open(candidate);
                } catch (ConformException notADump) {
                    continue;
                }
                String why = mismatch(d, modelDir, false);
                if (why == null) why = mismatch(d, modelDir, true);
                if (why == null) return d;
                refused.add(candidate + " (" + why + ")");
            }
        }
        throw new ConformException(Finding.REFERENCE_MISMATCH, "no reference dump matches " + modelDir + "; looked in " + dirs
                + (refused.isEmpty() ? ", found no dump there" : "; refused: " + String.join("; ", refused))
                + ". Name one with " + NAME_IT + ", or make one with reference-dumps/torch/dump_checkpoint.py");
    }

    /**
     * The reference a candidate dump was made from, by the sha256 of its manifest.json: its recorded folder
     * (relative to the working directory or to a search folder's parent), else every dump in {@code searchDirs}.
     */
    public static ReferenceDump locateBySha256(String sha256, String recordedDir, List<Path> searchDirs) {
        Set<Path> tries = new LinkedHashSet<>();
        if (!recordedDir.isEmpty()) {
            Path rec = Path.of(recordedDir);
            tries.add(rec.toAbsolutePath().normalize());
            for (Path s : searchDirs) {
                Path parent = s.toAbsolutePath().normalize().getParent();
                if (parent != null && !rec.isAbsolute()) tries.add(parent.resolve(rec).normalize());
            }
        }
        for (Path s : searchDirs) tries.addAll(candidates(s.toAbsolutePath().normalize(), null));
        for (Path p : tries) {
            if (!Files.exists(p)) continue;
            try {
                ReferenceDump d = ReferenceDump.open(p);
                if (d.manifestSha256().equals(sha256)) return d;
            } catch (ConformException notADump) {
                // another file or another dump: keep looking
            }
        }
        throw new ConformException(Finding.REFERENCE_MISMATCH, "no reference dump with manifest sha256 " + sha256 + " (the one the candidate was made from"
                + (recordedDir.isEmpty() ? "" : ", recorded as " + recordedDir) + "); looked at " + tries + ". Name it with " + NAME_IT);
    }

    private static List<Path> candidates(Path dir, Path model) {
        List<Path> out = new ArrayList<>();
        if (!Files.isDirectory(dir)) return out;
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir)) {
            for (Path p : ds) {
                if (p.equals(model)) continue;
                if (Files.isDirectory(p) ? Files.isRegularFile(p.resolve("manifest.json")) : ReferenceDump.isArchiveName(p) && namedLikeADump(p)) out.add(p);
            }
        } catch (IOException e) {
            return out;
        }
        out.sort(null);
        return out;
    }

    /**
     * Pitfall: finding an archive's manifest means decompressing up to it, and a checkpoint tarball next to the
     * model can be terabytes; so the search only opens archives whose name says "ref" or "dump" (an explicit
     * --reference / -Dk3.reference may have any name).
     */
    static boolean namedLikeADump(Path p) {
        String n = p.getFileName().toString().toLowerCase(java.util.Locale.ROOT);
        return n.contains("ref") || n.contains("dump");
    }

    /** Why the dump does not fit the model, or null. {@code headers}: also hash the shard headers. */
    static String mismatch(ReferenceDump dump, Path modelDir, boolean headers) {
        JsonNode files = dump.field("checkpoint", "files");
        Set<String> dumpShards = new TreeSet<>();
        for (JsonNode f : files) if (f.has("header_sha256")) dumpShards.add(f.path("name").asText());
        if (dumpShards.isEmpty()) return "its manifest lists no shard with a header hash (checkpoint.files[].header_sha256)";
        Set<String> modelShards = new TreeSet<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(modelDir, "*.safetensors")) {
            for (Path p : ds) modelShards.add(p.getFileName().toString());
        } catch (IOException e) {
            return "cannot list " + modelDir + ": " + e.getMessage();
        }
        for (String s : dumpShards) if (!modelShards.contains(s)) return "the model has no shard " + s + " (the dump's shards: " + summary(dumpShards) + ")";
        for (String s : modelShards) if (!dumpShards.contains(s)) return "the model's shard " + s + " is not in the dump's shard list (" + summary(dumpShards) + ")";
        for (JsonNode f : files) {
            if (!f.has("header_sha256")) continue;
            Path p = modelDir.resolve(f.path("name").asText());
            try {
                long size = Files.size(p);
                if (size != f.path("size").asLong(-1)) return p.getFileName() + " is " + size + " bytes, the dump's is " + f.path("size").asLong(-1);
                if (!headers) continue;
                long hb = f.path("header_bytes").asLong(-1);
                if (hb < 8 || hb > size) return "the dump's header_bytes " + hb + " for " + p.getFileName() + " does not fit its size " + size;
                String sha = headerSha256(p, hb);
                if (!sha.equals(f.path("header_sha256").asText())) return p.getFileName() + ": its safetensors header differs from the dump's (sha256 " + sha.substring(0, 12) + "…, the dump's " + f.path("header_sha256").asText().substring(0, Math.min(12, f.path("header_sha256").asText().length())) + "…)";
            } catch (IOException e) {
                return "cannot read " + p + ": " + e.getMessage();
            }
        }
        Path cfg = modelDir.resolve("config.json");
        if (!Files.isRegularFile(cfg)) return "the model has no config.json";
        try {
            String diff = firstDifference("", dump.field("config"), JSON.readTree(cfg.toFile()));
            if (diff != null) return "config.json differs from the dump's config at " + diff;
        } catch (IOException e) {
            return "cannot read " + cfg + ": " + e.getMessage();
        }
        return null;
    }

    private static String summary(Set<String> names) {
        List<String> l = new ArrayList<>(names);
        return l.size() <= 3 ? String.join(", ", l) : l.get(0) + " … " + l.get(l.size() - 1) + ", " + l.size() + " files";
    }

    /** sha256 of a file's first {@code n} bytes. */
    static String headerSha256(Path p, long n) throws IOException {
        MessageDigest md = ReferenceDump.digest();
        try (FileChannel ch = k3j.io.SafeFiles.open(p, "a model file")) {
            ByteBuffer buf = ByteBuffer.allocate(1 << 20);
            long left = n;
            while (left > 0) {
                buf.clear().limit((int) Math.min(buf.capacity(), left));
                int r = ch.read(buf);
                if (r < 0) throw new IOException(p + " ends before byte " + n);
                buf.flip();
                md.update(buf);
                left -= r;
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /** JSON path of the first difference, or null when equal (numbers compared by value). */
    static String firstDifference(String at, JsonNode want, JsonNode got) {
        if (want.isNumber() && got.isNumber()) return (k3j.config.ConfigReader.finite(want) && k3j.config.ConfigReader.finite(got)
                ? want.decimalValue().compareTo(got.decimalValue()) == 0 : want.doubleValue() == got.doubleValue()) ? null : (at.isEmpty() ? "/" : at) + " (dump " + want + ", model " + got + ")";
        if (want.isObject() && got.isObject()) {
            Set<String> keys = new TreeSet<>();
            want.fieldNames().forEachRemaining(keys::add);
            got.fieldNames().forEachRemaining(keys::add);
            for (String k : keys) {
                if (!want.has(k)) return at + "/" + k + " (only in the model's)";
                if (!got.has(k)) return at + "/" + k + " (only in the dump's)";
                String d = firstDifference(at + "/" + k, want.get(k), got.get(k));
                if (d != null) return d;
            }
            return null;
        }
        if (want.isArray() && got.isArray()) {
            if (want.size() != got.size()) return at + " (dump " + want.size() + " entries, model " + got.size() + ")";
            Iterator<JsonNode> a = want.elements(), b = got.elements();
            for (int i = 0; a.hasNext(); i++) {
                String d = firstDifference(at + "/" + i, a.next(), b.next());
                if (d != null) return d;
            }
            return null;
        }
        return want.equals(got) ? null : (at.isEmpty() ? "/" : at) + " (dump " + want + ", model " + got + ")";
    }

    /**
     * Full content check: the sha256 of every file the dump lists with one ({@code checkpoint.files[].sha256}),
     * reading every byte. {@code progress} gets one line per file. Throws on the first difference.
     */
    public static void verifyData(ReferenceDump dump, Path modelDir, Consumer<String> progress) {
        check(dump, modelDir);
        int hashed = 0;
        for (JsonNode f : dump.field("checkpoint", "files")) {
            String name = f.path("name").asText(), want = f.path("sha256").asText("");
            if (want.isEmpty()) continue;
            Path p = modelDir.resolve(name);
            if (!Files.isRegularFile(p)) throw new ConformException(Finding.REFERENCE_MISMATCH, "the model has no " + name + " (listed with a sha256 by " + dump.source() + ")");
            long t0 = System.nanoTime();
            String got;
            try (InputStream in = java.nio.channels.Channels.newInputStream(k3j.io.SafeFiles.open(p, "a model file"))) {
                MessageDigest md = ReferenceDump.digest();
                byte[] buf = new byte[1 << 20];
                for (int r; (r = in.read(buf)) > 0; ) md.update(buf, 0, r);
                got = HexFormat.of().formatHex(md.digest());
            } catch (IOException e) {
                throw new ConformException(Finding.REFERENCE_MISMATCH, "cannot read " + p + ": " + k3j.io.SafeFiles.why(e));
            }
            if (!got.equals(want)) throw new ConformException(Finding.REFERENCE_MISMATCH, name + ": its sha256 differs from the dump's: the data is not the data the reference was made from");
            hashed++;
            progress.accept(String.format(java.util.Locale.ROOT, "%-40s sha256 ok  %.1f s", name, (System.nanoTime() - t0) / 1e9));
        }
        if (hashed == 0) throw new ConformException(Finding.REFERENCE_MISMATCH, dump.source() + " lists no file sha256 (made with --no-data-hash): nothing to verify");
    }

    /** For callers that want the mapping without an exception: null when it matches. */
    public static String why(ReferenceDump dump, Path modelDir) {
        return mismatch(dump, modelDir, true);
    }

}
