package k3j.io;

import com.sun.nio.file.ExtendedOpenOption;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import k3j.io.CheckpointException.Rule;

/**
 * Reads tensor bytes into {@link MemorySegment}s: a positional read loop ({@link #read}), a read-only
 * mapping ({@link #map}) and an O_DIRECT read ({@link #readDirect}) that bypasses the page cache for
 * streamed experts. Channels are opened once per file and shared; every method is thread-safe.
 */
public final class TensorReader implements AutoCloseable {
    /** Bytes per positional read: whole ByteBuffers must stay under 2 GiB. */
    private static final long CHUNK = 1L << 30;

    /** Opens a file for O_DIRECT reads and reports its alignment; may refuse (tmpfs on old kernels, some overlays). */
    interface DirectOpener {
        DirectChannel open(Path file) throws IOException;
    }

    /** An O_DIRECT channel and the alignment its reads need (offset, length and buffer address). */
    record DirectChannel(FileChannel channel, int alignment) {}

    static final DirectOpener O_DIRECT = file -> {
        long block = Files.getFileStore(file).getBlockSize();
        if (block < 512 || block > (1 << 20) || Long.bitCount(block) != 1) {
            throw new IOException("file store block size " + block + " is not a usable O_DIRECT alignment");
        }
        return new DirectChannel(FileChannel.open(file, StandardOpenOption.READ, ExtendedOpenOption.DIRECT), (int) block);
    };

    private final Map<Path, FileChannel> channels = new ConcurrentHashMap<>();
    private final Map<Path, DirectChannel> direct = new ConcurrentHashMap<>();
    private final Map<Path, Boolean> directRefused = new ConcurrentHashMap<>();
    private final DirectOpener opener;
    private final Consumer<String> notes;
    private final AtomicBoolean noted = new AtomicBoolean();

    /** A reader whose one-time notes (O_DIRECT refused) go to standard error. */
    public TensorReader() {
        this(O_DIRECT, s -> System.err.println("k3: note: " + s));
    }

    TensorReader(DirectOpener opener, Consumer<String> notes) {
        this.opener = opener;
        this.notes = notes;
    }

    /** The tensor's bytes, read with a positional loop into a segment of {@code arena}. */
    public MemorySegment read(TensorInfo t, Arena arena) {
        return read(t.file(), t.offset(), t.length(), t.name(), arena);
    }

    /** {@code length} bytes at absolute {@code offset} of {@code file}; {@code what} names them in errors. */
    public MemorySegment read(Path file, long offset, long length, String what, Arena arena) {
        MemorySegment seg = arena.allocate(length, 64);
        FileChannel ch = channel(file);
        long got = 0;
        try {
            while (got < length) {
                int n = ch.read(seg.asSlice(got, Math.min(CHUNK, length - got)).asByteBuffer(), offset + got);
                if (n < 0) throw shortRead(file, what, got, length);
                got += n;
            }
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, what, "read failed after " + got + " bytes: " + e, e);
        }
        return seg;
    }

    /** The tensor's bytes mapped read-only for the life of {@code arena}. */
    public MemorySegment map(TensorInfo t, Arena arena) {
        FileChannel ch = channel(t.file());
        try {
            if (t.offset() + t.length() > ch.size()) throw shortRead(t.file(), t.name(), Math.max(0, ch.size() - t.offset()), t.length());
            return ch.map(FileChannel.MapMode.READ_ONLY, t.offset(), t.length(), arena);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, t.file(), t.name(), "cannot map: " + e, e);
        }
    }

    /** The tensor's bytes read with O_DIRECT, or through {@link #read} where the file system refuses it. */
    public MemorySegment readDirect(TensorInfo t, Arena arena) {
        return readDirect(t.file(), t.offset(), t.length(), t.name(), arena);
    }

    /**
     * O_DIRECT read of {@code [offset, offset+length)}: reads the enclosing window aligned to the file
     * store's block size into an aligned buffer and returns the requested slice of it. Falls back to
     * {@link #read} (with a one-time note) when O_DIRECT is refused for the file.
     */
    public MemorySegment readDirect(Path file, long offset, long length, String what, Arena arena) {
        DirectChannel dc = directChannel(file);
        if (dc == null) return read(file, offset, length, what, arena);
        long align = dc.alignment();
        long start = offset - offset % align;
        long end = offset + length;
        long windowEnd = (end + align - 1) / align * align;
        long window = windowEnd - start;
        MemorySegment seg = arena.allocate(window, align);
        long need = end - start;
        long got = 0;
        try {
            while (got < need) {
                // the last aligned block may run past EOF: the kernel then returns what exists
                int n = dc.channel().read(seg.asSlice(got, Math.min(CHUNK, window - got)).asByteBuffer(), start + got);
                if (n > 0) got += n;
                // O_DIRECT reads whole blocks: a partial block means the file ended there
                if (got < need && (n <= 0 || got % align != 0)) {
                    throw shortRead(file, what, Math.max(0, got - (offset - start)), length);
                }
            }
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, what, "O_DIRECT read failed: " + e, e);
        }
        return seg.asSlice(offset - start, length);
    }

    /** Whether reads of {@code file} through {@link #readDirect} really bypass the page cache. */
    public boolean directIo(Path file) {
        return directChannel(file) != null;
    }

    /** Reads and widens a BF16, F16, F32 or U8 tensor to float32 (see {@link Widen}). */
    public float[] readFloats(TensorInfo t) {
        if (!t.dtype().widenable()) return Widen.toFloats(t, MemorySegment.NULL);
        try (Arena arena = Arena.ofConfined()) {
            return Widen.toFloats(t, read(t, arena));
        }
    }

    private static CheckpointException shortRead(Path file, String what, long got, long length) {
        return new CheckpointException(Rule.SHORT_READ, file, what,
                "short read: file ended after " + got + " of " + length + " bytes");
    }

    private FileChannel channel(Path file) {
        return channels.computeIfAbsent(file, f -> {
            try {
                return FileChannel.open(f, StandardOpenOption.READ);
            } catch (IOException e) {
                throw new CheckpointException(Rule.IO, f, null, "cannot open: " + e, e);
            }
        });
    }

    private DirectChannel directChannel(Path file) {
        if (directRefused.containsKey(file)) return null;
        DirectChannel dc = direct.get(file);
        if (dc != null) return dc;
        try {
            dc = opener.open(file);
        } catch (IOException | UnsupportedOperationException e) {
            directRefused.put(file, Boolean.TRUE);
            if (noted.compareAndSet(false, true)) {
                notes.accept("O_DIRECT refused for " + file + " (" + e.getMessage() + "); reading through the page cache");
            }
            return null;
        }
        DirectChannel raced = direct.putIfAbsent(file, dc);
        if (raced != null) {
            close(dc.channel());
            return raced;
        }
        return dc;
    }

    @Override
    public void close() {
        channels.values().forEach(TensorReader::close);
        direct.values().forEach(d -> close(d.channel()));
        channels.clear();
        direct.clear();
    }

    private static void close(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // read-only channels lose nothing when close fails
        }
    }
}
