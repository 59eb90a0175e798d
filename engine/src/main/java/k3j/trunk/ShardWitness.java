package k3j.trunk;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;

/**
 * The checkpoint as the witness of a trunk layer (docs/formats.md, "Trunk binding"): trunk.json is never its own.
 * A layer's run, as read from trunk.bin, is compared with the checkpoint's own bytes: its tensors must be exactly
 * the layer's trunk tensors in the shards (no name more or less), each with the shards' dtype and shape, each byte
 * equal to the shard's, and the SHA-256 of the shard's bytes equal to the digest trunk.json records for that
 * tensor (so digests swapped or rewritten in trunk.json are caught too). What {@code conform} and {@code bisect}
 * run on every layer they judge, and {@code --verify-trunk=full} on every layer at open.
 */
public final class ShardWitness {
    private static final int PIECE = 8 << 20;

    private final CheckpointIndex index;
    private final List<TrunkManifest.Layer> expected;
    private final AtomicLong bytes = new AtomicLong(), layers = new AtomicLong(), nanos = new AtomicLong();

    private ShardWitness(CheckpointIndex index) {
        this.index = index;
        this.expected = TrunkPacker.layout(index, true).layers();
    }

    /** A witness over {@code index}'s shards (reads their headers only until a layer is checked). */
    public static ShardWitness of(CheckpointIndex index) {
        return new ShardWitness(index);
    }

    /** Layers compared so far. */
    public long layers() {
        return layers.get();
    }

    /** Shard bytes read and compared so far. */
    public long bytes() {
        return bytes.get();
    }

    /** Seconds spent comparing so far (summed over threads). */
    public double seconds() {
        return nanos.get() / 1e9;
    }

    /**
     * Checks that {@code run} (layer {@code layer}'s bytes read from {@code bin}, as trunk.json lays them out) holds
     * exactly the checkpoint's bytes of that layer's trunk tensors; a difference is a {@link TrunkException} naming
     * the layer and the tensor.
     */
    public void check(TrunkManifest.Layer layer, MemorySegment run, Path bin) {
        long t0 = System.nanoTime();
        int l = layer.layer();
        if (l >= expected.size()) {
            throw new TrunkException(bin, l, "the checkpoint has no layer " + l + " (it has " + expected.size() + "): the trunk is another checkpoint's");
        }
        Set<String> want = new TreeSet<>(expected.get(l).tensors().keySet()), have = new TreeSet<>(layer.tensors().keySet());
        if (!want.equals(have)) {
            Set<String> missing = new TreeSet<>(want), extra = new TreeSet<>(have);
            missing.removeAll(have);
            extra.removeAll(want);
            throw new TrunkException(bin, l, "holds other tensors than the checkpoint's layer " + l + " (missing " + missing + ", not in the checkpoint "
                    + extra + "): the trunk is another checkpoint's; repack with k3 pack-trunk");
        }
        ByteBuffer buf = ByteBuffer.allocate(PIECE);
        long read = 0;
        for (String name : want) {
            TrunkManifest.Tensor t = layer.tensors().get(name);
            TensorInfo src = index.find(name).orElseThrow();
            if (src.dtype() != t.dtype() || !Arrays.equals(src.shape(), t.shape()) || src.length() != t.length()) {
                throw new TrunkException(bin, l, "tensor \"" + name + "\" is " + t.dtype() + Arrays.toString(t.shape()) + " in trunk.json, "
                        + src.dtype() + Arrays.toString(src.shape()) + " in the checkpoint; repack with k3 pack-trunk");
            }
            MessageDigest md = SourceId.sha256();
            try (FileChannel ch = k3j.io.SafeFiles.open(src.file(), "a checkpoint shard")) {
                for (long pos = 0; pos < src.length(); ) {
                    int n = (int) Math.min(PIECE, src.length() - pos);
                    buf.clear().limit(n);
                    while (buf.hasRemaining()) {
                        if (ch.read(buf, src.offset() + pos + buf.position()) <= 0) {
                            throw new TrunkException(src.file(), l, "short read of \"" + name + "\" (the shard is shorter than its header says)");
                        }
                    }
                    md.update(buf.array(), 0, n);
                    long at = MemorySegment.ofArray(buf.array()).asSlice(0, n).mismatch(run.asSlice(t.offset() + pos, n));
                    if (at >= 0) {
                        throw new TrunkException(bin, l, "tensor \"" + name + "\" differs from the checkpoint's at byte " + (pos + at) + " of "
                                + src.length() + " (trunk.bin changed since the pack, or trunk.json points elsewhere); repack with k3 pack-trunk");
                    }
                    pos += n;
                }
            } catch (IOException e) {
                throw new TrunkException(src.file(), l, "cannot read \"" + name + "\" to compare the trunk with the checkpoint: " + e.getMessage(), e);
            }
            String digest = HexFormat.of().formatHex(md.digest());
            if (!digest.equals(t.sha256())) {
                throw new TrunkException(bin, l, "trunk.json records another data digest for \"" + name + "\" (" + prefix(t.sha256()) + ") than its bytes, the same as the checkpoint's, hash to ("
                        + prefix(digest) + "): trunk.json was edited; repack with k3 pack-trunk");
            }
            read += src.length();
        }
        bytes.addAndGet(read);
        layers.incrementAndGet();
        nanos.addAndGet(System.nanoTime() - t0);
    }

    private static String prefix(String hex) {
        return hex == null ? "none" : hex.substring(0, Math.min(16, hex.length())) + "...";
    }
}
