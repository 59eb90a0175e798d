package k3j.trunk;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Consumer;

/**
 * Positional reads of whole aligned runs from one file, through O_DIRECT where the file system allows it
 * (ENGINE.md §5.6: each streamed run is read once per token and never reused, so the page cache only
 * costs) and through the page cache where it refuses, with a one-time note. O_DIRECT needs the offset,
 * the length and the buffer address aligned to {@value #ALIGN}; {@link #read} checks all three. A read
 * that ends early is a {@link TrunkException}, never a padded or tolerated run.
 */
public final class DirectReader implements AutoCloseable {
    public static final int ALIGN = TrunkManifest.ALIGN;
    /** Bytes per read call: a ByteBuffer is limited to 2 GiB, and one large O_DIRECT call keeps many requests in flight. */
    static final long CHUNK = 1L << 30;

    private final Path file;
    private final FileChannel channel;
    private final boolean direct;

    private DirectReader(Path file, FileChannel channel, boolean direct) {
        this.file = file;
        this.channel = channel;
        this.direct = direct;
    }

    /**
     * Opens {@code file} for reading, with O_DIRECT when {@code wantDirect} and the file system's block size
     * divides {@value #ALIGN}; otherwise buffered, telling {@code notes} why (once, here).
     */
    public static DirectReader open(Path file, boolean wantDirect, Consumer<String> notes) {
        if (wantDirect) {
            try {
                long block = Files.getFileStore(file).getBlockSize();
                if (block <= 0 || ALIGN % block != 0) throw new IOException("file store block size " + block + " does not divide " + ALIGN);
                return new DirectReader(file, FileChannel.open(file, StandardOpenOption.READ, ExtendedOpenOption.DIRECT), true);
            } catch (IOException | UnsupportedOperationException e) {
                notes.accept("O_DIRECT refused for " + file + " (" + e.getMessage() + "); reading through the page cache");
            }
        }
        try {
            return new DirectReader(file, FileChannel.open(file, StandardOpenOption.READ), false);
        } catch (IOException e) {
            throw new TrunkException(file, TrunkException.NO_LAYER, "cannot open: " + e, e);
        }
    }

    public Path file() {
        return file;
    }

    /** Whether reads bypass the page cache. */
    public boolean direct() {
        return direct;
    }

    public long size() {
        try {
            return channel.size();
        } catch (IOException e) {
            throw new TrunkException(file, TrunkException.NO_LAYER, "cannot stat: " + e, e);
        }
    }

    /**
     * Reads exactly {@code length} bytes at {@code offset} into {@code dst[0, length)}; {@code layer} names the
     * run in errors. Thread-safe (positional reads on a shared channel).
     */
    public void read(long offset, long length, MemorySegment dst, int layer) {
        if (direct && (offset % ALIGN != 0 || length % ALIGN != 0 || dst.address() % ALIGN != 0)) {
            throw new IllegalArgumentException("O_DIRECT read of layer " + layer + " is not aligned to " + ALIGN + ": offset "
                    + offset + ", length " + length + ", buffer address " + dst.address());
        }
        if (dst.byteSize() < length) throw new IllegalArgumentException("buffer of " + dst.byteSize() + " bytes for a " + length + "-byte read");
        long got = 0;
        try {
            while (got < length) {
                int n = channel.read(dst.asSlice(got, Math.min(CHUNK, length - got)).asByteBuffer(), offset + got);
                if (n <= 0) {
                    throw new TrunkException(file, layer, "short read: " + got + " of " + length + " bytes at offset " + offset
                            + " (the file ends at " + size() + "; truncated since it was opened?)");
                }
                got += n;
                if (direct && got < length && got % ALIGN != 0) {
                    // O_DIRECT reads whole blocks: a partial block means the file ended there
                    throw new TrunkException(file, layer, "short read: " + got + " of " + length + " bytes at offset " + offset
                            + " (the file ends at " + size() + "; truncated since it was opened?)");
                }
            }
        } catch (IOException e) {
            throw new TrunkException(file, layer, "read failed after " + got + " of " + length + " bytes at offset " + offset + ": " + e, e);
        }
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // read-only channel: nothing is lost
        }
    }
}
