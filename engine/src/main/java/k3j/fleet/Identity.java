package k3j.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import k3j.io.SafetensorsFile;
import k3j.io.StrictJson;

/**
 * What every shard of one run must share, or it is foreign: the model by content ({@link #model}: config, headers and
 * a sample of every tensor's data; not its path, since a fleet mounts the checkpoint at a different path per node), the
 * reference dump (its manifest's sha256), the build (the k3 jar's sha256), the shard count, what the run judges
 * ({@code logits}, {@code experts}) and the whole work plan (every shard's layers and expert ranges).
 */
public record Identity(String model, String reference, String build, int count, String scope, String plan) {
    public static final List<String> FIELDS = List.of("model", "reference", "build", "count", "scope", "plan");

    public void put(ObjectNode o) {
        o.put("model", model);
        o.put("reference", reference);
        o.put("build", build);
        o.put("count", count);
        o.put("scope", scope);
        o.put("plan", plan);
    }

    public static Identity read(JsonNode o, String where) {
        java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
        return new Identity(StrictJson.text(o, "model", where, bad), StrictJson.text(o, "reference", where, bad), StrictJson.text(o, "build", where, bad),
                StrictJson.int32(StrictJson.need(o, "count", where, bad), where + " count", bad), StrictJson.text(o, "scope", where, bad),
                StrictJson.text(o, "plan", where, bad));
    }

    /** The fields in which {@code other} differs, named ("model", "build", ...); empty when equal. */
    public List<String> differences(Identity other) {
        return FIELDS.stream().filter(f -> !field(f).equals(other.field(f))).toList();
    }

    private String field(String f) {
        return switch (f) {
            case "model" -> model;
            case "reference" -> reference;
            case "build" -> build;
            case "count" -> Integer.toString(count);
            case "scope" -> scope;
            default -> plan;
        };
    }

    /** "0-11 | 12-23 | ... | 84-92 + logits": every part's {@link WorkPlan.Part#text()}, shard 0 first. */
    public static String plan(WorkPlan p) {
        return String.join(" | ", p.parts().stream().map(WorkPlan.Part::text).toList());
    }

    /** Bytes of each tensor's data read into the model's identity at its start, middle and end. */
    public static final int SAMPLE_BYTES = 64;

    /**
     * sha256 over the model's content, wherever it is mounted: its config.json, each safetensors shard's file name, size
     * and header, and {@link #SAMPLE_BYTES} bytes at the start, middle and end of every tensor's data. A copy with a
     * tensor swapped, scaled, filled or transposed (headers equal to the original's) differs in its samples; a change
     * that misses every sampled window is not seen here (the shard that reads that tensor judges it; {@code --verify-data}
     * hashes every byte).
     */
    public static String model(Path folder, List<SafetensorsFile> shards, List<k3j.io.TensorInfo> tensors) throws IOException {
        MessageDigest md = sha256();
        md.update(k3j.io.SafeFiles.readAll(folder.resolve("config.json"), k3j.config.ConfigReader.MAX_CONFIG_BYTES, "the model's config"));
        for (SafetensorsFile s : shards.stream().sorted(java.util.Comparator.comparing(f -> f.file().getFileName().toString())).toList()) {
            md.update(s.file().getFileName().toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
            md.update(ByteBuffer.allocate(16).putLong(s.fileSize()).putLong(s.headerLength()).flip());
            try (FileChannel ch = k3j.io.SafeFiles.open(s.file(), "a checkpoint shard")) {
                ByteBuffer header = ByteBuffer.allocate(Math.toIntExact(s.headerLength()));
                while (header.hasRemaining()) {
                    if (ch.read(header, 8 + header.position()) < 0) throw new IOException(s.file() + ": shorter than its header");
                }
                md.update(header.flip());
            }
        }
        java.util.Map<Path, FileChannel> open = new java.util.HashMap<>();
        try {
            for (k3j.io.TensorInfo t : tensors.stream().sorted(java.util.Comparator.comparing(k3j.io.TensorInfo::name)).toList()) {
                FileChannel ch = open.get(t.file());
                if (ch == null) open.put(t.file(), ch = k3j.io.SafeFiles.open(t.file(), "a checkpoint shard"));
                md.update(t.name().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                md.update((byte) 0);
                long n = Math.min(SAMPLE_BYTES, t.length());
                for (long at : new long[] {0, (t.length() - n) / 2, t.length() - n}) {
                    ByteBuffer b = ByteBuffer.allocate((int) n);
                    while (b.hasRemaining()) {
                        if (ch.read(b, t.offset() + at + b.position()) < 0) throw new IOException(t.file() + ": shorter than tensor " + t.name());
                    }
                    md.update(b.flip());
                }
            }
        } finally {
            for (FileChannel ch : open.values()) ch.close();
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /**
     * sha256 of the code this process runs: every entry of the k3 jar (name and bytes; not its timestamps, its Maven
     * metadata or manifest), or every file of a classes folder (a test run).
     */
    public static String runningBuild() throws IOException {
        Path where;
        try {
            where = Path.of(Identity.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        } catch (java.net.URISyntaxException | NullPointerException e) {
            throw new IOException("the build's own location is not a file: " + e.getMessage());
        }
        MessageDigest md = sha256();
        if (Files.isRegularFile(where)) {
            // every entry's name and bytes, not the jar file's: two builds of one source differ only in entry timestamps
            try (java.util.zip.ZipFile zip = new java.util.zip.ZipFile(where.toFile())) {
                for (java.util.zip.ZipEntry e : zip.stream().filter(e -> !e.isDirectory()).sorted(java.util.Comparator.comparing(java.util.zip.ZipEntry::getName)).toList()) {
                    if (e.getName().startsWith("META-INF/maven/") || e.getName().equals("META-INF/MANIFEST.MF")) continue;
                    md.update(e.getName().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    try (InputStream in = zip.getInputStream(e)) {
                        byte[] buf = new byte[1 << 16];
                        for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
                    }
                }
            }
        } else {
            try (Stream<Path> s = Files.walk(where)) {
                for (Path p : s.filter(Files::isRegularFile).sorted().toList()) {
                    md.update(where.relativize(p).toString().getBytes(java.nio.charset.StandardCharsets.UTF_8));
                    digest(md, p);
                }
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    public static String sha256(byte[] bytes) {
        return HexFormat.of().formatHex(sha256().digest(bytes));
    }

    private static void digest(MessageDigest md, Path file) throws IOException {
        try (InputStream in = k3j.io.SafeFiles.newInputStream(file, "a build file")) {
            byte[] buf = new byte[1 << 16];
            for (int n; (n = in.read(buf)) > 0; ) md.update(buf, 0, n);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
