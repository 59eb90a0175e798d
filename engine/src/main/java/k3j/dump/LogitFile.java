package k3j.dump;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * Logits another engine wrote, read for {@code k3 compare-logits} (docs/formats.md): the C engine's and k3j's
 * {@code --dump-logits} file (exactly V raw little-endian float32, the last prompt position), a {@code .npy}
 * (float32 little-endian, C order, shape [V] or [rows, V]), or a candidate dump's {@code logits} [T, V].
 * A file of the wrong length, another dtype or layout, or holding a NaN or an infinity is refused
 * ({@link LogitFileException}): nothing is padded, cut or cleaned.
 *
 * @param rows   1 for a single vector, else the positions it holds (row t = after ids[0..t])
 * @param values [rows][vocab] row-major
 */
public record LogitFile(Path source, String format, int rows, int vocab, float[] values) {
    /** A logit file that cannot be compared, with the reason. */
    public static final class LogitFileException extends RuntimeException {
        public LogitFileException(String message) {
            super(message);
        }
    }

    /** The most rows a logit file may hold ([T, V] with T positions of a reference: at most the run's 36,864). */
    static final int MAX_ROWS = 36864;

    /** The largest logit file for {@code vocab}: MAX_ROWS rows of float32 and a .npy header, within one Java array. */
    static long maxBytes(int vocab) {
        return Math.min(Integer.MAX_VALUE - 16, 4L * vocab * MAX_ROWS + 65536);
    }

    /** Reads {@code path} for a model of {@code vocab} logits. */
    public static LogitFile read(Path path, int vocab) {
        if (Files.isDirectory(path) || path.getFileName().toString().equals("manifest.json")) {
            return candidate(Files.isDirectory(path) ? path : path.toAbsolutePath().getParent(), vocab);
        }
        if (CandidateFile.isOneFile(path)) return candidate(path, vocab);
        byte[] b;
        try {
            if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS)) throw new LogitFileException("cannot read " + path + ": no such file");
            b = k3j.io.SafeFiles.readAll(path, maxBytes(vocab), "a logit file");
        } catch (IOException e) {
            throw new LogitFileException(k3j.io.SafeFiles.why(e));
        }
        if (k3j.io.Npy.hasMagic(b)) return npy(path, b, vocab);
        if (path.getFileName().toString().toLowerCase(Locale.ROOT).endsWith(".npy")) throw new LogitFileException(path + ": named .npy but has no NumPy magic");
        if (b.length != 4L * vocab) {
            throw new LogitFileException(path + " is " + b.length + " bytes; a raw logit file (--dump-logits) holds exactly V = " + vocab
                    + " float32 = " + 4L * vocab + " bytes");
        }
        return checked(new LogitFile(path, "raw float32 (--dump-logits)", 1, vocab, floats(ByteBuffer.wrap(b), vocab)));
    }

    /** Whether {@code path} names a candidate dump (a folder, its manifest.json, or a one-file candidate). */
    public static boolean isCandidate(Path path) {
        return Files.isDirectory(path) || path.getFileName() != null && path.getFileName().toString().equals("manifest.json") || CandidateFile.isOneFile(path);
    }

    /** The candidate a path names: the folder for its manifest.json, else the path. */
    public static Path candidateRoot(Path path) {
        return !Files.isDirectory(path) && path.getFileName().toString().equals("manifest.json") ? path.toAbsolutePath().getParent() : path;
    }

    /** One logits array of a candidate, checked like any logit file. */
    public static LogitFile ofCandidate(CandidateDump c, float[] v, int vocab) {
        if (v.length % vocab != 0) throw new LogitFileException(c.source() + ": logits hold " + v.length + " floats, not a multiple of V = " + vocab);
        return checked(new LogitFile(c.source(), "candidate dump (" + c.engine() + ")", v.length / vocab, vocab, v));
    }

    /** The ids a candidate dump's rows followed (its manifest's reference ids), or null for a bare logit file, which does not say. */
    public static int[] followedIds(Path path) {
        boolean one = CandidateFile.isOneFile(path);
        if (!one && !Files.isDirectory(path) && !path.getFileName().toString().equals("manifest.json")) return null;
        CandidateDump c = CandidateDump.open(one || Files.isDirectory(path) ? path : path.toAbsolutePath().getParent());
        com.fasterxml.jackson.databind.JsonNode ref = c.manifest().path("reference");
        return ref.has("ids") ? k3j.io.StrictJson.ints(ref, "ids", c.source() + " manifest reference", ReferenceDump::mismatch) : null;
    }

    private static LogitFile candidate(Path dir, int vocab) {
        CandidateDump c = CandidateDump.open(dir);
        float[] v = c.logits(false);
        if (v == null) throw new LogitFileException(dir + ": the candidate holds no logits");
        if (v.length % vocab != 0) throw new LogitFileException(dir + ": logits hold " + v.length + " floats, not a multiple of V = " + vocab);
        return checked(new LogitFile(dir, "candidate dump (" + c.engine() + ")", v.length / vocab, vocab, v));
    }

    /** A .npy ('<f4', C order) of shape (V,) or (rows, V); anything else is refused. */
    static LogitFile npy(Path path, byte[] b, int vocab) {
        k3j.io.Npy a;
        try {
            a = k3j.io.Npy.parse(b, path.toString());
        } catch (k3j.io.Npy.NpyException e) {
            throw new LogitFileException(e.getMessage());
        }
        long[] shape = a.shape();
        if (!a.descr().equals("<f4")) throw new LogitFileException(path + ": dtype '" + a.descr() + "'; only little-endian float32 ('<f4') is read");
        if (shape.length < 1 || shape.length > 2) throw new LogitFileException(path + ": .npy shape " + java.util.Arrays.toString(shape) + "; logits are [V] or [rows, V]");
        long v = shape[shape.length - 1], rows = shape.length == 2 ? shape[0] : 1;
        if (v != vocab) throw new LogitFileException(path + ": last dimension " + v + ", the model's vocabulary is V = " + vocab);
        if (rows < 1) throw new LogitFileException(path + ": .npy holds no row");
        if (rows > MAX_ROWS) throw new LogitFileException(path + ": .npy shape " + java.util.Arrays.toString(shape) + " declares " + rows + " rows, more than " + MAX_ROWS + " positions");
        return checked(new LogitFile(path, ".npy " + java.util.Arrays.toString(shape), (int) rows, vocab, floats(a.data(), (int) (rows * v))));
    }

    private static float[] floats(ByteBuffer b, int n) {
        float[] f = new float[n];
        b.order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer().get(f);
        return f;
    }

    private static LogitFile checked(LogitFile f) {
        for (int i = 0; i < f.values.length; i++) {
            if (!Float.isFinite(f.values[i])) {
                throw new LogitFileException(f.source + ": logit " + (i % f.vocab) + (f.rows > 1 ? " of row " + i / f.vocab : "") + " is " + f.values[i]
                        + "; a file with non-finite values is refused");
            }
        }
        return f;
    }

    /** One row [vocab]. */
    public float[] row(int r) {
        return java.util.Arrays.copyOfRange(values, r * vocab, (r + 1) * vocab);
    }
}
