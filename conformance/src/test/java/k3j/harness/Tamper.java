package k3j.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Hostile copies of checked-in data, made the way an attacker (or a careless script) would: a reference dump
 * whose arrays or manifest fields are altered with the sha256 list kept consistent, so that only the rule under
 * test can catch it. Every method works on a copy; the repository's files are never touched.
 */
public final class Tamper {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Tamper() {}

    /** A flat copy of a directory (dumps and checkpoints are flat). */
    public static Path copy(Path from, Path to) {
        try {
            Files.createDirectories(to);
            try (Stream<Path> s = Files.list(from)) {
                for (Path p : s.toList()) Files.copy(p, to.resolve(p.getFileName()));
            }
            return to;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Edits a dump's manifest.json in place. */
    public static void manifest(Path dump, Consumer<ObjectNode> edit) {
        try {
            Path m = dump.resolve("manifest.json");
            ObjectNode root = (ObjectNode) JSON.readTree(m.toFile());
            edit.accept(root);
            Files.write(m, JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(root));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Sets float {@code index} of array {@code key} to {@code value} and updates its sha256, so only the comparison can notice. */
    public static void setFloat(Path dump, String key, int index, float value) {
        Path f = dump.resolve(key + ".bin");
        try {
            byte[] b = Files.readAllBytes(f);
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putFloat(4 * index, value);
            replace(dump, key, b);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Multiplies every float of array {@code key} by {@code factor} and updates its sha256: a whole stage subtly wrong. */
    public static void scale(Path dump, String key, float factor) {
        try {
            byte[] b = Files.readAllBytes(dump.resolve(key + ".bin"));
            ByteBuffer buf = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i + 4 <= b.length; i += 4) buf.putFloat(i, buf.getFloat(i) * factor);
            replace(dump, key, b);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Replaces array {@code key}'s file with {@code bytes} and records their sha256 (the shape is left as it was). */
    public static void replace(Path dump, String key, byte[] bytes) {
        try {
            Files.write(dump.resolve(key + ".bin"), bytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        manifest(dump, m -> ((ObjectNode) m.path("arrays").path(key)).put("sha256", sha256(bytes)));
    }

    /** The first {@code n} bytes of array {@code key}, sha256 updated: a truncated array that hashes clean. */
    public static void truncate(Path dump, String key, int n) {
        try {
            byte[] b = Files.readAllBytes(dump.resolve(key + ".bin"));
            replace(dump, key, java.util.Arrays.copyOf(b, Math.min(n, b.length)));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** XORs the byte at {@code at} of {@code file} with {@code mask}, in place (the file's identity moves, its size does not). */
    public static void flipByte(Path file, long at, int mask) {
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1);
            if (ch.read(b, at) != 1) throw new IOException(file + ": no byte at " + at);
            b.put(0, (byte) (b.get(0) ^ mask)).rewind();
            ch.write(b, at);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
