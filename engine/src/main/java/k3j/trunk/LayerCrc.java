package k3j.trunk;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

/** The CRC-32C of a layer's run as it sits in memory (the packer's checksum, recomputed on read; the JDK's is an intrinsic). */
public final class LayerCrc {
    /** One ByteBuffer view is at most 2 GiB; a run is checksummed in 1 GiB pieces. */
    private static final long PIECE = 1L << 30;

    private LayerCrc() {}

    public static int of(MemorySegment run, long nbytes) {
        CRC32C crc = new CRC32C();
        for (long at = 0; at < nbytes; at += PIECE) crc.update(run.asSlice(at, Math.min(PIECE, nbytes - at)).asByteBuffer());
        return (int) crc.getValue();
    }
}
