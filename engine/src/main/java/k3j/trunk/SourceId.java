package k3j.trunk;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;

/**
 * The layout part of a trunk's source identity, checked at every open before the data ({@link DataBinding}):
 * the shard names and sizes and a SHA-256 of every shard's header bytes (names, dtypes, shapes, offsets).
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
            try (FileChannel ch = k3j.io.SafeFiles.open(s.file(), "a checkpoint shard")) {
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

    static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("the JDK has no SHA-256", e);
        }
    }
}
