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

    /** The hash of each layer's first and last {@value #SAMPLE} bytes, read from the shard it was packed from. */
    static String sampleSha256(CheckpointIndex index, List<TrunkManifest.Layer> layers) {
        Map<String, Path> files = new HashMap<>();
        for (SafetensorsFile s : index.shards()) files.put(s.file().getFileName().toString(), s.file());
        MessageDigest md = sha256();
        Map<Path, FileChannel> open = new HashMap<>();
        try {
            for (TrunkManifest.Layer l : layers) {
                Path file = files.get(l.shard());
                if (file == null) {
                    throw new TrunkException(index.path(), l.layer(), "was packed from shard " + l.shard() + ", which this checkpoint does not have");
                }
                FileChannel ch = open.get(file);
                if (ch == null) {
                    ch = FileChannel.open(file, StandardOpenOption.READ);
                    open.put(file, ch);
                }
                int k = (int) Math.min(SAMPLE, l.nbytes());
                update(md, ch, file, l, l.shardOffset(), k);
                update(md, ch, file, l, l.shardOffset() + l.nbytes() - k, k);
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

    private static void update(MessageDigest md, FileChannel ch, Path file, TrunkManifest.Layer l, long at, int k) throws IOException {
        ByteBuffer buf = ByteBuffer.allocate(k);
        while (buf.hasRemaining()) {
            if (ch.read(buf, at + buf.position()) <= 0) {
                throw new TrunkException(file, l.layer(), "short read at " + (at + buf.position()) + " (the shard is shorter than the trunk says)");
            }
        }
        md.update(buf.flip());
    }

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }
}
