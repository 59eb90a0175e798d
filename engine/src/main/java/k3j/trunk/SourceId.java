package k3j.trunk;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;
import k3j.io.TensorInfo;

/**
 * Identifies the weights a trunk was packed from, cheaply enough to check at every open: the shard
 * names and sizes, a SHA-256 of every shard's header bytes (names, dtypes, shapes, offsets), and a
 * SHA-256 of the first and last 4 KiB of every layer's run as it lies in the shards, which tells apart
 * two checkpoints with the same layout and different weights (a fine-tune) without reading 109 GB.
 */
final class SourceId {
    static final int SAMPLE = 4096;

    private SourceId() {}

    static List<TrunkManifest.Shard> shards(CheckpointIndex index) {
        List<TrunkManifest.Shard> out = new ArrayList<>();
        for (SafetensorsFile s : index.shards()) out.add(new TrunkManifest.Shard(s.file().getFileName().toString(), s.fileSize()));
        return List.copyOf(out);
    }

    static String headerSha256(CheckpointIndex index) {
        MessageDigest md = sha256();
        for (SafetensorsFile s : index.shards()) {
            md.update(s.file().getFileName().toString().getBytes(StandardCharsets.UTF_8));
            md.update((byte) 0);
            md.update(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, s.fileSize()));
            try (FileChannel ch = FileChannel.open(s.file(), StandardOpenOption.READ)) {
                ByteBuffer buf = ByteBuffer.allocate((int) Math.min(1 << 20, s.dataStart()));
                long pos = 0;
                while (pos < s.dataStart()) {
                    buf.clear().limit((int) Math.min(buf.capacity(), s.dataStart() - pos));
                    int n = ch.read(buf, pos);
                    if (n <= 0) throw new TrunkException(s.file(), TrunkException.NO_LAYER, "short read of the header at " + pos);
                    pos += n;
                    md.update(buf.flip());
                }
            } catch (IOException e) {
                throw new TrunkException(s.file(), TrunkException.NO_LAYER, "cannot read the header: " + e, e);
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    /**
     * The hash of each layer's first and last {@value #SAMPLE} run bytes, rebuilt from the checkpoint: each byte is
     * read from the tensor the manifest places there (by name, from the checkpoint's own offsets), zero between
     * tensors. Equal to the same bytes of trunk.bin when the trunk was packed from this checkpoint.
     */
    static String sampleSha256(CheckpointIndex index, List<TrunkManifest.Layer> layers) {
        MessageDigest md = sha256();
        Map<Path, FileChannel> open = new HashMap<>();
        try {
            for (TrunkManifest.Layer l : layers) {
                int k = (int) Math.min(SAMPLE, l.nbytes());
                md.update(rebuild(index, open, l, 0, k));
                md.update(rebuild(index, open, l, l.nbytes() - k, k));
            }
        } catch (IOException e) {
            throw new TrunkException(index.path(), TrunkException.NO_LAYER, "cannot read a shard: " + e, e);
        } finally {
            for (FileChannel ch : open.values()) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // read-only
                }
            }
        }
        return HexFormat.of().formatHex(md.digest());
    }

    private static ByteBuffer rebuild(CheckpointIndex index, Map<Path, FileChannel> open, TrunkManifest.Layer l, long from, int k)
            throws IOException {
        ByteBuffer out = ByteBuffer.allocate(k);
        for (TrunkManifest.Tensor t : l.tensors().values()) {
            long a = Math.max(from, t.offset()), b = Math.min(from + k, t.offset() + t.length());
            if (a >= b) continue;
            TensorInfo src = index.find(t.name()).orElseThrow(() -> new TrunkException(index.path(), l.layer(),
                    "was packed from other weights: tensor \"" + t.name() + "\" is not in this checkpoint; repack with k3 pack-trunk"));
            FileChannel ch = open.get(src.file());
            if (ch == null) {
                ch = FileChannel.open(src.file(), StandardOpenOption.READ);
                open.put(src.file(), ch);
            }
            ByteBuffer slice = out.duplicate().position((int) (a - from)).limit((int) (b - from));
            long at = src.offset() + (a - t.offset());
            while (slice.hasRemaining()) {
                if (ch.read(slice, at + slice.position() - (a - from)) <= 0) {
                    throw new TrunkException(src.file(), l.layer(), "short read of \"" + t.name() + "\" (the shard is shorter than its header says)");
                }
            }
        }
        return out;
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }
}
