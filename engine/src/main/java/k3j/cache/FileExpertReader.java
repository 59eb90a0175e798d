package k3j.cache;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * Positional FileChannel reads into off-heap slots (ENGINE.md §6.7). Channels are opened once per
 * file and shared by the read threads. In {@link ReadMode#DIRECT} a contiguous expert is one
 * O_DIRECT read of the 4096-aligned window [lo, hi) around it, pad = off − lo; the last window may
 * run past end of file, so a read that covers pad + n bytes is complete. A filesystem that refuses
 * O_DIRECT (tmpfs) gets buffered reads, with one note. Non-contiguous experts are six buffered reads.
 */
public final class FileExpertReader implements ExpertReader {
    /** Opens a file for O_DIRECT reads; throws where the filesystem refuses it. */
    @FunctionalInterface
    public interface DirectOpener {
        FileChannel open(Path file) throws IOException;

        DirectOpener O_DIRECT = file -> {
            long block = Files.getFileStore(file).getBlockSize();
            if (block <= 0 || CacheGeometry.ALIGN % block != 0) {
                throw new IOException("filesystem block size " + block + " does not divide " + CacheGeometry.ALIGN);
            }
            return FileChannel.open(file, StandardOpenOption.READ, ExtendedOpenOption.DIRECT);
        };
    }

    private final ReadMode mode;
    private final Consumer<String> notes;
    private final DirectOpener opener;
    private final Map<Path, FileChannel> buffered = new ConcurrentHashMap<>();
    private final Map<Path, FileChannel> direct = new ConcurrentHashMap<>();
    private final Map<Path, Boolean> directRefused = new ConcurrentHashMap<>();
    private final AtomicBoolean noted = new AtomicBoolean();
    private final AtomicLong directReads = new AtomicLong();
    private final AtomicLong bufferedReads = new AtomicLong();

    public FileExpertReader(ReadMode mode, Consumer<String> notes) {
        this(mode, notes, DirectOpener.O_DIRECT);
    }

    /** With {@code opener} standing in for open(O_DIRECT): tests use it to play a refusing filesystem. */
    public FileExpertReader(ReadMode mode, Consumer<String> notes, DirectOpener opener) {
        this.mode = mode;
        this.notes = notes;
        this.opener = opener;
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
            FileChannel ch = bufferedChannel(loc.file());
            for (ExpertPart p : ExpertPart.values()) {
                ExpertLocation.Extent e = loc.parts().get(p.ordinal());
                readFully(ch, slot.asSlice(loc.partOffset(p), e.length()), e.offset(), loc, p.name());
            }
            bufferedReads.incrementAndGet();
            return 0;
        }
        long off = loc.offset();
        FileChannel dch = mode == ReadMode.DIRECT ? directChannel(loc.file()) : null;
        if (dch == null) {
            if (n > slot.byteSize()) throw new IOException("expert of " + n + " bytes does not fit a slot of " + slot.byteSize());
            readFully(bufferedChannel(loc.file()), slot.asSlice(0, n), off, loc, "run");
            bufferedReads.incrementAndGet();
            return 0;
        }
        long lo = CacheGeometry.alignDown(off), hi = CacheGeometry.alignUp(off + n), pad = off - lo;
        if (hi - lo > slot.byteSize()) throw new IOException("aligned window of " + (hi - lo) + " bytes does not fit a slot of " + slot.byteSize());
        ByteBuffer bb = slot.asSlice(0, hi - lo).asByteBuffer();
        long got = 0;
        while (got < pad + n) {
            int r = dch.read(bb, lo + got);
            if (r <= 0) break;
            got += r;
        }
        if (got < pad + n) {
            throw new ShortReadException(String.format("short load of %s @%d (got %d of %d bytes)",
                    loc.file(), off, Math.max(0, got - pad), n));
        }
        directReads.incrementAndGet();
        return pad;
    }

    private static void readFully(FileChannel ch, MemorySegment dst, long at, ExpertLocation loc, String what) throws IOException {
        ByteBuffer bb = dst.asByteBuffer();
        long got = 0;
        while (bb.hasRemaining()) {
            int r = ch.read(bb, at + got);
            if (r <= 0) break;
            got += r;
        }
        if (bb.hasRemaining()) {
            throw new ShortReadException(String.format("short load of %s %s @%d (got %d of %d bytes)",
                    loc.file(), what, at, got, dst.byteSize()));
        }
    }

    private FileChannel bufferedChannel(Path file) throws IOException {
        FileChannel ch = buffered.get(file);
        if (ch != null) return ch;
        synchronized (this) {
            ch = buffered.get(file);
            if (ch == null) {
                ch = FileChannel.open(file, StandardOpenOption.READ);
                buffered.put(file, ch);
            }
            return ch;
        }
    }

    /** The O_DIRECT channel for {@code file}, or null where the filesystem refuses it (noted once). */
    private FileChannel directChannel(Path file) throws IOException {
        FileChannel ch = direct.get(file);
        if (ch != null) return ch;
        if (directRefused.containsKey(file)) return null;
        synchronized (this) {
            ch = direct.get(file);
            if (ch != null) return ch;
            if (directRefused.containsKey(file)) return null;
            try {
                ch = opener.open(file);
                direct.put(file, ch);
                return ch;
            } catch (IOException | UnsupportedOperationException e) {
                if (!Files.isReadable(file)) throw new IOException("cannot open " + file, e);
                directRefused.put(file, true);
                if (noted.compareAndSet(false, true)) notes.accept("note: O_DIRECT refused for " + file + " (" + e.getMessage() + "); reading it (and any other such file) through the page cache");
                return null;
            }
        }
    }

    /** Whether O_DIRECT was refused for {@code file} and its reads fell back to buffered. */
    public boolean directRefused(Path file) {
        return directRefused.containsKey(file);
    }

    @Override
    public void close() throws IOException {
        IOException first = null;
        for (FileChannel ch : buffered.values()) first = closeQuietly(ch, first);
        for (FileChannel ch : direct.values()) first = closeQuietly(ch, first);
        buffered.clear();
        direct.clear();
        if (first != null) throw first;
    }

    private static IOException closeQuietly(FileChannel ch, IOException first) {
        try {
            ch.close();
        } catch (IOException e) {
            if (first == null) return e;
            first.addSuppressed(e);
        }
        return first;
    }
}
