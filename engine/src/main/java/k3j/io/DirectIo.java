package k3j.io;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * The O_DIRECT mechanism shared by the tensor reader, the expert cache and the trunk stream: opening with
 * O_DIRECT (refused where the file store cannot), the {@value #ALIGN}-aligned window around a byte range,
 * the positional read loop that stops at end of file, and aligned off-heap buffers. What a refusal or a
 * short read means stays with each caller.
 */
public final class DirectIo {
    /** O_DIRECT needs the offset, the length and the buffer address aligned to this. */
    public static final int ALIGN = 4096;
    /** Bytes per read call: a ByteBuffer is limited to 2 GiB, and one large O_DIRECT call keeps many requests in flight. */
    public static final long CHUNK = 1L << 30;

    private DirectIo() {}

    /**
     * com.sun.nio.file.ExtendedOpenOption.DIRECT (module jdk.unsupported), looked up by name: naming the class makes
     * javac warn on every build that it is internal API, and the option is the only way to O_DIRECT from Java.
     */
    private static final java.nio.file.OpenOption DIRECT = direct();

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static java.nio.file.OpenOption direct() {
        try {
            return (java.nio.file.OpenOption) Enum.valueOf((Class) Class.forName("com.sun.nio.file.ExtendedOpenOption"), "DIRECT");
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Opens a file for O_DIRECT reads; throws where the file system refuses it. Tests stand in a refusing one. */
    @FunctionalInterface
    public interface Opener {
        FileChannel open(Path file) throws IOException;
    }

    /** open(O_DIRECT), refused up front when the file store's block size does not divide {@value #ALIGN}. */
    public static final Opener O_DIRECT = file -> {
        long block = Files.getFileStore(file).getBlockSize();
        if (block <= 0 || ALIGN % block != 0) throw new IOException("file store block size " + block + " does not divide " + ALIGN);
        return FileChannel.open(file, StandardOpenOption.READ, DIRECT);
    };

    /** The note a refusal gets (once). */
    public static String refusal(Path file, Exception e) {
        return "O_DIRECT refused for " + file + " (" + e.getMessage() + "); reading through the page cache";
    }

    public static long alignDown(long n) {
        return n & -ALIGN;
    }

    public static long alignUp(long n) {
        return (n + ALIGN - 1) & -ALIGN;
    }

    /**
     * The aligned window [lo, hi) around [off, off + n): the bytes start at {@code pad = off − lo} in it, and
     * the last block may run past end of file, so a read of {@link #need} bytes from lo is complete.
     */
    public record Window(long lo, long hi, long pad, long need) {
        public static Window around(long off, long n) {
            long lo = alignDown(off);
            return new Window(lo, alignUp(off + n), off - lo, off - lo + n);
        }

        public long length() {
            return hi - lo;
        }
    }

    /** {@code bytes} rounded up to {@value #ALIGN}, zeroed and aligned to {@value #ALIGN}, freed with {@code arena}. */
    public static MemorySegment allocate(Arena arena, long bytes) {
        return arena.allocate(alignUp(bytes), ALIGN);
    }

    /**
     * Positional reads at {@code at} into {@code dst} (up to its size) until {@code need} bytes arrived. Stops
     * early at end of file and, when {@code direct}, at a partial block (O_DIRECT reads whole blocks: a partial
     * one means the file ended there). Returns the bytes read; fewer than {@code need} is a short read the
     * caller reports in its own terms.
     */
    public static long read(FileChannel ch, MemorySegment dst, long at, long need, boolean direct) throws IOException {
        long got = 0, cap = dst.byteSize();
        while (got < need) {
            int n = ch.read(dst.asSlice(got, Math.min(CHUNK, cap - got)).asByteBuffer(), at + got);
            if (n <= 0) break;
            got += n;
            if (direct && got < need && got % ALIGN != 0) break;
        }
        return got;
    }

    /**
     * Read channels per file, opened once and shared by threads: buffered ones, and O_DIRECT ones where the
     * file system allows. A file whose O_DIRECT open is refused is remembered and reported once (for all
     * files); {@link #direct} then gives null and the caller reads through {@link #buffered}.
     */
    public static final class Channels implements AutoCloseable {
        private final Opener opener;
        private final Consumer<String> notes;
        private final Map<Path, FileChannel> buffered = new ConcurrentHashMap<>();
        private final Map<Path, FileChannel> open = new ConcurrentHashMap<>();
        private final Map<Path, Boolean> refused = new ConcurrentHashMap<>();
        private final AtomicBoolean noted = new AtomicBoolean();

        public Channels(Opener opener, Consumer<String> notes) {
            this.opener = opener;
            this.notes = notes;
        }

        /** The O_DIRECT channel of {@code file}, or null where it was refused; an unreadable file is an error, not a refusal. */
        public FileChannel direct(Path file) throws IOException {
            FileChannel ch = open.get(file);
            if (ch != null || refused.containsKey(file)) return ch;
            synchronized (this) {
                ch = open.get(file);
                if (ch != null || refused.containsKey(file)) return ch;
                try {
                    ch = opener.open(file);
                } catch (IOException | UnsupportedOperationException e) {
                    if (!Files.isReadable(file)) throw new IOException("cannot open " + file, e);
                    refused.put(file, Boolean.TRUE);
                    if (noted.compareAndSet(false, true)) notes.accept(refusal(file, e));
                    return null;
                }
                open.put(file, ch);
                return ch;
            }
        }

        /** The buffered (page cache) channel of {@code file}. */
        public FileChannel buffered(Path file) throws IOException {
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

        /** Whether O_DIRECT was refused for {@code file}. */
        public boolean refused(Path file) {
            return refused.containsKey(file);
        }

        @Override
        public void close() throws IOException {
            IOException first = null;
            for (Map<Path, FileChannel> m : List.of(buffered, open)) {
                for (FileChannel ch : m.values()) {
                    try {
                        ch.close();
                    } catch (IOException e) {
                        if (first == null) first = e;
                        else first.addSuppressed(e);
                    }
                }
                m.clear();
            }
            if (first != null) throw first;
        }
    }
}
