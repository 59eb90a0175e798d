package k3j.bisect;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import k3j.io.CheckpointIndex;
import k3j.io.DType;
import k3j.io.TensorInfo;
import k3j.kernels.Fp;
import k3j.model.Binder;

/**
 * Writes a corrupted copy of a checkpoint directory: every file of the source is hard-linked into the target
 * (copied where links are refused) except the shards a corruption touches, which are copied and patched in
 * place. Headers are never rewritten, so the copy binds exactly as the source does and its shards keep their
 * header hashes; only tensor bytes differ. Cheap on any size: a corruption costs one shard copy, and a copy keeps
 * the source's holes (every all-zero block stays unwritten), so a sparse fixture's shard costs its data, not its
 * apparent size.
 */
public final class Corruptions {
    private Corruptions() {}

    /** Writes {@code dst} (must not exist or be empty) = {@code src} with every corruption applied, in order. */
    public static void write(Path src, Path dst, List<Corruption> corruptions) {
        CheckpointIndex index = CheckpointIndex.open(src);
        Set<Path> touched = new LinkedHashSet<>();
        List<List<TensorInfo>> tensors = corruptions.stream().map(c -> tensors(index, c)).toList();
        for (int i = 0; i < corruptions.size(); i++) {
            changesSomething(src, tensors.get(i), corruptions.get(i));
            for (TensorInfo t : tensors.get(i)) touched.add(t.file().getFileName());
        }
        try {
            Files.createDirectories(dst);
            try (Stream<Path> files = Files.list(src)) {
                for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
                    Path to = dst.resolve(f.getFileName());
                    if (touched.contains(f.getFileName())) copySparse(f, to);
                    else link(f, to);
                }
            }
        } catch (IOException e) {
            throw new BisectException("cannot write the corrupted copy " + dst + ": " + e.getMessage(), e);
        }
        for (int i = 0; i < corruptions.size(); i++) apply(dst, tensors.get(i), corruptions.get(i));
    }

    private static void link(Path f, Path to) throws IOException {
        try {
            Files.createLink(to, f.toAbsolutePath());
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (IOException | UnsupportedOperationException e) {
            copySparse(f, to);
        }
    }

    static final int SPARSE_BLOCK = 1 << 20;

    /**
     * Copies {@code f} to a new file {@code to}, leaving every all-zero {@value #SPARSE_BLOCK}-byte block a hole:
     * equal bytes, and on a file system with sparse files only the blocks that hold data take disk.
     */
    static void copySparse(Path f, Path to) throws IOException {
        try (FileChannel in = k3j.io.SafeFiles.open(f, "a checkpoint file");
             FileChannel out = k3j.io.AtomicWrite.part(to, StandardOpenOption.CREATE_NEW)) {
            ByteBuffer b = ByteBuffer.allocateDirect(SPARSE_BLOCK), zero = ByteBuffer.allocateDirect(SPARSE_BLOCK);
            long size = in.size();
            for (long at = 0; at < size; at += SPARSE_BLOCK) {
                b.clear().limit((int) Math.min(SPARSE_BLOCK, size - at));
                while (b.hasRemaining()) {
                    if (in.read(b, at + b.position()) < 0) throw new IOException(f + " ended at " + (at + b.position()) + " of " + size + " bytes while being copied");
                }
                b.flip();
                if (b.mismatch(zero.clear().limit(b.limit())) < 0) continue;
                while (b.hasRemaining()) out.write(b, at + b.position());
            }
            if (out.size() < size) out.write(ByteBuffer.allocate(1), size - 1);   // a trailing hole: the length is the source's
        }
        Files.setLastModifiedTime(to, Files.getLastModifiedTime(f));
    }

    /** The tensors a corruption rewrites, each checked to exist and to fit the corruption. */
    static List<TensorInfo> tensors(CheckpointIndex index, Corruption c) {
        return switch (c) {
            case Corruption.Swap s -> {
                TensorInfo a = tensor(index, c.layer(), s.a()), b = tensor(index, c.layer(), s.b());
                if (a.dtype() != b.dtype() || !Arrays.equals(a.shape(), b.shape())) {
                    throw new BisectException("cannot swap " + a + " and " + b + ": a swap needs the same shape and dtype (else the copy would not bind)");
                }
                yield List.of(a, b);
            }
            case Corruption.NibbleFlip n -> Stream.of("w1", "w2", "w3")
                    .map(w -> tensor(index, c.layer(), "block_sparse_moe.experts." + n.expert() + "." + w + ".weight_packed")).toList();
            case Corruption.Fill f -> List.of(floats(tensor(index, c.layer(), f.tensor())));
            case Corruption.Scale s -> List.of(floats(tensor(index, c.layer(), s.tensor())));
            case Corruption.Transpose t -> {
                TensorInfo m = floats(tensor(index, c.layer(), t.tensor()));
                if (m.rank() != 2) throw new BisectException("cannot transpose " + m + ": not 2-D");
                yield List.of(m);
            }
            case Corruption.ExpertByte b -> {
                TensorInfo t = tensor(index, c.layer(), Corruption.expertTensor(b.expert(), b.part()));
                if (b.index() < 0 || b.index() >= t.length()) throw new BisectException(t + ": byte " + b.index() + " is outside its " + t.length() + " bytes");
                yield List.of(t);
            }
            case Corruption.ExpertRow r -> {
                TensorInfo t = tensor(index, c.layer(), Corruption.expertTensor(r.expert(), r.matrix() + "_packed"));
                if (t.rank() != 2 || r.row() < 0 || r.row() >= t.shape()[0]) throw new BisectException(t + ": no row " + r.row());
                yield List.of(t);
            }
        };
    }

    /** Reads a tensor's bytes from wherever the caller keeps them (the source, or the copy being patched). */
    @FunctionalInterface
    private interface Bytes {
        ByteBuffer of(TensorInfo t) throws IOException;
    }

    /**
     * Refuses a corruption that would change no byte of the source (a scale that rounds back to the same bf16,
     * a fill with the values already there, a swap of equal tensors, a transpose of a symmetric matrix): such a
     * copy would pass every gate and prove nothing.
     */
    private static void changesSomething(Path src, List<TensorInfo> ts, Corruption c) {
        try {
            Bytes original = t -> read(src.resolve(t.file().getFileName()), t);
            Map<TensorInfo, ByteBuffer> after = patched(ts, c, original);
            for (Map.Entry<TensorInfo, ByteBuffer> e : after.entrySet()) {
                if (!original.of(e.getKey()).equals(e.getValue().position(0).limit(e.getValue().capacity()))) return;
            }
        } catch (IOException e) {
            throw new BisectException("cannot read " + src + " for " + c.spec() + ": " + e.getMessage(), e);
        }
        throw new BisectException(c.spec() + " changes no byte of " + ts.stream().map(TensorInfo::name).toList()
                + " (the result rounds back to the stored values); the copy would equal the original");
    }

    private static void apply(Path dst, List<TensorInfo> ts, Corruption c) {
        try {
            for (Map.Entry<TensorInfo, ByteBuffer> e : patched(ts, c, t -> read(dst.resolve(t.file().getFileName()), t)).entrySet()) {
                try (FileChannel ch = k3j.io.AtomicWrite.part(dst.resolve(e.getKey().file().getFileName()))) {
                    write(ch, e.getKey(), e.getValue());
                }
            }
        } catch (IOException e) {
            throw new BisectException("cannot patch " + dst + " for " + c.spec() + ": " + e.getMessage(), e);
        }
    }

    /** The new bytes of every tensor {@code c} rewrites, from the bytes {@code bytes} gives. */
    private static Map<TensorInfo, ByteBuffer> patched(List<TensorInfo> ts, Corruption c, Bytes bytes) throws IOException {
        Map<TensorInfo, ByteBuffer> out = new LinkedHashMap<>();
        switch (c) {
            case Corruption.Swap s -> {
                out.put(ts.get(0), bytes.of(ts.get(1)));
                out.put(ts.get(1), bytes.of(ts.get(0)));
            }
            case Corruption.NibbleFlip n -> {
                for (TensorInfo t : ts) {
                    if (!t.file().equals(ts.getFirst().file())) throw new BisectException(t + ": an expert's tensors must share a shard");
                    ByteBuffer b = bytes.of(t);
                    for (int i = 0; i < b.capacity(); i++) b.put(i, flipNibbles(b.get(i)));
                    out.put(t, b);
                }
            }
            case Corruption.Fill f -> {
                TensorInfo t = ts.getFirst();
                float[] v = decode(t, bytes.of(t));
                if (f.from() < 0 || f.from() >= v.length) throw new BisectException(t + ": fill from " + f.from() + " is outside its " + v.length + " elements");
                Arrays.fill(v, (int) f.from(), v.length, f.value());
                out.put(t, encode(t, v));
            }
            case Corruption.Scale s -> {
                TensorInfo t = ts.getFirst();
                float[] v = decode(t, bytes.of(t));
                for (int i = 0; i < v.length; i++) v[i] *= s.factor();
                out.put(t, encode(t, v));
            }
            case Corruption.ExpertByte eb -> {
                TensorInfo t = ts.getFirst();
                ByteBuffer b = bytes.of(t);
                int i = Math.toIntExact(eb.index());
                b.put(i, (byte) (b.get(i) ^ eb.mask()));
                out.put(t, b);
            }
            case Corruption.ExpertRow er -> {
                TensorInfo t = ts.getFirst();
                ByteBuffer b = bytes.of(t);
                int rows = Math.toIntExact(t.shape()[0]), cols = Math.toIntExact(t.shape()[1]), from = ((er.row() + 1) % rows) * cols;
                for (int j = 0; j < cols; j++) b.put(er.row() * cols + j, b.get(from + j));
                out.put(t, b);
            }
            case Corruption.Transpose tr -> {
                TensorInfo t = ts.getFirst();
                int r = Math.toIntExact(t.shape()[0]), cols = Math.toIntExact(t.shape()[1]), size = t.dtype().size();
                ByteBuffer in = bytes.of(t), o = ByteBuffer.allocate(in.capacity());
                for (int i = 0; i < r; i++) {
                    for (int j = 0; j < cols; j++) o.put((j * r + i) * size, in, (i * cols + j) * size, size);
                }
                out.put(t, o);
            }
        }
        return out;
    }

    /** Parses one corruption spec (see {@link Corruption#spec()}). */
    public static Corruption parse(String spec) {
        return Corruption.parse(spec);
    }

    /** The byte with its low and high nibbles exchanged (FP4 element 2j ↔ 2j+1). */
    public static byte flipNibbles(byte b) {
        int v = b & 0xFF;
        return (byte) ((v << 4 | v >>> 4) & 0xFF);
    }

    private static TensorInfo tensor(CheckpointIndex index, int layer, String suffix) {
        String name = Binder.LAYERS + layer + "." + suffix;
        return index.find(name).orElseThrow(() -> new BisectException("no tensor \"" + name + "\" in " + index.path()));
    }

    private static TensorInfo floats(TensorInfo t) {
        if (t.dtype() != DType.BF16 && t.dtype() != DType.F16 && t.dtype() != DType.F32) {
            throw new BisectException(t + ": only BF16, F16 and F32 tensors can be filled, scaled or transposed");
        }
        return t;
    }

    private static ByteBuffer read(Path file, TensorInfo t) throws IOException {
        try (FileChannel ch = k3j.io.SafeFiles.open(file, "a checkpoint file")) {
            ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(t.length()));
            long at = t.offset();
            while (b.hasRemaining()) {
                int n = ch.read(b, at + b.position());
                if (n < 0) throw new IOException("short read of " + t);
            }
            return b.flip().order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    private static void write(FileChannel ch, TensorInfo t, ByteBuffer b) throws IOException {
        b.position(0).limit(b.capacity());
        if (b.capacity() != t.length()) throw new IllegalStateException("rewrite of " + t + " has " + b.capacity() + " bytes");
        while (b.hasRemaining()) ch.write(b, t.offset() + b.position());
    }

    private static float[] decode(TensorInfo t, ByteBuffer b) {
        b.order(ByteOrder.LITTLE_ENDIAN);
        float[] v = new float[Math.toIntExact(t.elementCount())];
        for (int i = 0; i < v.length; i++) {
            v[i] = switch (t.dtype()) {
                case BF16 -> Fp.bf16(b.getShort(2 * i));
                case F16 -> Float.float16ToFloat(b.getShort(2 * i));
                default -> b.getFloat(4 * i);
            };
        }
        return v;
    }

    /** Back to the tensor's dtype, rounded to nearest even (BF16: the top half of the float, rounded). */
    private static ByteBuffer encode(TensorInfo t, float[] v) {
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(t.length())).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < v.length; i++) {
            switch (t.dtype()) {
                case BF16 -> {
                    int bits = Float.floatToRawIntBits(v[i]);
                    b.putShort(2 * i, (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16));
                }
                case F16 -> b.putShort(2 * i, Float.floatToFloat16(v[i]));
                default -> b.putFloat(4 * i, v[i]);
            }
        }
        return b;
    }
}
