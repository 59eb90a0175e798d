package k3j.trunk;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Consumer;
import k3j.io.DirectIo;

/**
 * Positional reads of whole aligned runs from one file, through O_DIRECT where the file system allows it
 * (docs/semantics.md §5.6: each streamed run is read once per token and never reused, so the page cache only
 * costs) and through the page cache where it refuses, with a one-time note. O_DIRECT needs the offset,
 * the length and the buffer address aligned to {@value #ALIGN}; {@link #read} checks all three. A read
 * that ends early is a {@link TrunkException}, never a padded or tolerated run.
 */
public final class DirectReader implements AutoCloseable {
    public static final int ALIGN = DirectIo.ALIGN;

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
                return new DirectReader(file, DirectIo.O_DIRECT.open(file), true);
            } catch (IOException | UnsupportedOperationException e) {
                notes.accept(DirectIo.refusal(file, e));
            }
        }
        try {
            return new DirectReader(file, k3j.io.SafeFiles.open(file, "a trunk file"), false);
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
        long got;
        try {
            got = DirectIo.read(channel, dst.asSlice(0, length), offset, length, direct);
        } catch (IOException e) {
            throw new TrunkException(file, layer, "read failed at offset " + offset + " (" + length + " bytes): " + e, e);
        }
        if (got < length) {
            throw new TrunkException(file, layer, "short read: " + got + " of " + length + " bytes at offset " + offset
                    + " (the file ends at " + size() + "; truncated since it was opened?)");
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
