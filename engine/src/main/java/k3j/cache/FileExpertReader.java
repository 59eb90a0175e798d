package k3j.cache;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import k3j.io.DirectIo;

/**
 * Positional FileChannel reads into off-heap slots (docs/semantics.md §6.7). Channels are opened once per
 * file and shared by the read threads. In {@link ReadMode#DIRECT} a contiguous expert is one
 * O_DIRECT read of the aligned {@link DirectIo.Window} around it into its slot, the bytes starting at
 * pad = off − lo. A filesystem that refuses O_DIRECT (tmpfs) gets buffered reads, with one note.
 * Non-contiguous experts are six buffered reads.
 */
public final class FileExpertReader implements ExpertReader {
    private final ReadMode mode;
    private final DirectIo.Channels channels;
    private final AtomicLong directReads = new AtomicLong();
    private final AtomicLong bufferedReads = new AtomicLong();

    public FileExpertReader(ReadMode mode, Consumer<String> notes) {
        this(mode, notes, DirectIo.O_DIRECT);
    }

    /** With {@code opener} standing in for open(O_DIRECT): tests use it to play a refusing filesystem. */
    public FileExpertReader(ReadMode mode, Consumer<String> notes, DirectIo.Opener opener) {
        this.mode = mode;
        this.channels = new DirectIo.Channels(opener, s -> notes.accept("note: " + s));
    }

    /** Expert reads that went through O_DIRECT. */
    public long directReads() {
        return directReads.get();
    }

    /** Expert reads that went through the page cache. */
    public long bufferedReads() {
        return bufferedReads.get();
    }

    @Override
    public long read(ExpertLocation loc, MemorySegment slot) throws IOException {
        long n = loc.length();
        if (!loc.contiguous()) {
            if (n > slot.byteSize()) throw new IOException("expert of " + n + " bytes does not fit a slot of " + slot.byteSize());
            FileChannel ch = channels.buffered(loc.file());
            for (ExpertPart p : ExpertPart.values()) {
                ExpertLocation.Extent e = loc.parts().get(p.ordinal());
                readFully(ch, slot.asSlice(loc.partOffset(p), e.length()), e.offset(), loc, p.name());
            }
            bufferedReads.incrementAndGet();
            return 0;
        }
        long off = loc.offset();
        FileChannel dch = mode == ReadMode.DIRECT ? channels.direct(loc.file()) : null;
        if (dch == null) {
            if (n > slot.byteSize()) throw new IOException("expert of " + n + " bytes does not fit a slot of " + slot.byteSize());
            readFully(channels.buffered(loc.file()), slot.asSlice(0, n), off, loc, "run");
            bufferedReads.incrementAndGet();
            return 0;
        }
        DirectIo.Window w = DirectIo.Window.around(off, n);
        if (w.length() > slot.byteSize()) throw new IOException("aligned window of " + w.length() + " bytes does not fit a slot of " + slot.byteSize());
        long got = DirectIo.read(dch, slot.asSlice(0, w.length()), w.lo(), w.need(), true);
        if (got < w.need()) {
            throw new ShortReadException(String.format("short load of %s @%d (got %d of %d bytes)",
                    loc.file(), off, Math.max(0, got - w.pad()), n));
        }
        directReads.incrementAndGet();
        return w.pad();
    }

    private static void readFully(FileChannel ch, MemorySegment dst, long at, ExpertLocation loc, String what) throws IOException {
        long got = DirectIo.read(ch, dst, at, dst.byteSize(), false);
        if (got < dst.byteSize()) {
            throw new ShortReadException(String.format("short load of %s %s @%d (got %d of %d bytes)",
                    loc.file(), what, at, got, dst.byteSize()));
        }
    }

    /** Whether O_DIRECT was refused for {@code file} and its reads fell back to buffered. */
    public boolean directRefused(Path file) {
        return channels.refused(file);
    }

    @Override
    public void close() throws IOException {
        channels.close();
    }
}
