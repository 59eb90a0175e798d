package k3j.harness;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertLocator;
import k3j.cache.ExpertPart;

/**
 * The ExpertCacheGate's shard, written for real and read back for real. Adversarial on purpose:
 * the expert size (Σ parts) is not a multiple of 4096 and starts at an odd offset, the six tensors
 * sit in a non-canonical order inside each run, some experts have a gap between two tensors (the
 * six-read path), the last expert ends at end of file (the O_DIRECT window runs past EOF), and
 * every byte depends on (layer, expert, part, index), so serving expert a's bytes for b, or one
 * part for another, is visible.
 */
public final class SyntheticExpertShard implements ExpertLocator {
    /** Lengths of w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale (sum 15,494 = 3·4096 + 3,206). */
    public static final long[] PART_BYTES = {5003, 157, 4999, 161, 5011, 163};
    /** The order the six parts are written inside one contiguous run. */
    public static final int[] FILE_ORDER = {2, 1, 0, 5, 3, 4};
    public static final long HEADER = 1237;
    public static final int GAP = 13;

    public final Path file;
    public final int layers;
    public final int experts;
    public final long[] partBytes;
    private final ExpertLocation[] locations;

    private SyntheticExpertShard(Path file, int layers, int experts, long[] partBytes, ExpertLocation[] locations) {
        this.file = file;
        this.layers = layers;
        this.experts = experts;
        this.partBytes = partBytes;
        this.locations = locations;
    }

    public long expertBytes() {
        long n = 0;
        for (long b : partBytes) n += b;
        return n;
    }

    /** Experts with (layer + expert) % 7 == 2 have a gap before their fourth tensor: not contiguous. */
    public static boolean gapped(int layer, int expert) {
        return (layer + expert) % 7 == 2;
    }

    public static byte value(int layer, int expert, int part, long i) {
        long z = ((long) layer << 48) ^ ((long) expert << 32) ^ ((long) part << 28) ^ i;
        z += 0x9E3779B97F4A7C15L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return (byte) (z ^ (z >>> 31));
    }

    public byte[] expected(int layer, int expert, ExpertPart part) {
        return expected(layer, expert, part, partBytes);
    }

    public static byte[] expected(int layer, int expert, ExpertPart part, long[] partBytes) {
        byte[] b = new byte[(int) partBytes[part.ordinal()]];
        for (int i = 0; i < b.length; i++) b[i] = value(layer, expert, part.ordinal(), i);
        return b;
    }

    public static SyntheticExpertShard write(Path file, int layers, int experts) throws IOException {
        return write(file, layers, experts, PART_BYTES);
    }

    public static SyntheticExpertShard write(Path file, int layers, int experts, long[] partBytes) throws IOException {
        ExpertLocation[] locs = new ExpertLocation[layers * experts];
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
            ByteBuffer header = ByteBuffer.allocate((int) HEADER);
            for (int i = 0; i < HEADER; i++) header.put((byte) (0xA5 ^ i));
            ch.write(header.flip(), 0);
            long at = HEADER;
            for (int l = 0; l < layers; l++) {
                for (int e = 0; e < experts; e++) {
                    ExpertLocation.Extent[] ext = new ExpertLocation.Extent[6];
                    for (int k = 0; k < FILE_ORDER.length; k++) {
                        if (k == 3 && gapped(l, e)) at += GAP;
                        int p = FILE_ORDER[k];
                        ExpertPart part = ExpertPart.values()[p];
                        ByteBuffer bb = ByteBuffer.wrap(expected(l, e, part, partBytes));
                        while (bb.hasRemaining()) ch.write(bb, at + bb.position());
                        ext[p] = new ExpertLocation.Extent(at, partBytes[p]);
                        at += partBytes[p];
                    }
                    locs[l * experts + e] = new ExpertLocation(file, List.of(ext));
                }
            }
        }
        return new SyntheticExpertShard(file, layers, experts, partBytes.clone(), locs);
    }

    @Override
    public int layers() {
        return layers;
    }

    @Override
    public int experts() {
        return experts;
    }

    @Override
    public int probeLayer() {
        return 0;
    }

    @Override
    public ExpertLocation locate(int layer, int expert) throws ExpertLoadException {
        if (layer < 0 || layer >= layers || expert < 0 || expert >= experts) {
            throw new ExpertLoadException(layer, expert, "not in the synthetic shard");
        }
        return locations[layer * experts + expert];
    }

    public ExpertLocation location(int layer, int expert) {
        return locations[layer * experts + expert];
    }

    /** The same offsets read with a plain FileChannel, no cache: the reference the cache must equal. */
    public byte[] directRead(int layer, int expert, ExpertPart part) throws IOException {
        ExpertLocation.Extent e = location(layer, expert).parts().get(part.ordinal());
        ByteBuffer bb = ByteBuffer.allocate((int) e.length());
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            while (bb.hasRemaining()) {
                if (ch.read(bb, e.offset() + bb.position()) <= 0) throw new IOException("short direct read of " + file);
            }
        }
        return bb.array();
    }

    public List<int[]> allKeys() {
        List<int[]> out = new ArrayList<>();
        for (int l = 0; l < layers; l++) for (int e = 0; e < experts; e++) out.add(new int[] {l, e});
        return out;
    }
}
