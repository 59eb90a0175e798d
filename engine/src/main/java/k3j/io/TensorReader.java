package k3j.io;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.function.Consumer;
import k3j.io.CheckpointException.Rule;

/**
 * Reads tensor bytes into {@link MemorySegment}s: a positional read loop ({@link #read}), a read-only
 * mapping ({@link #map}) and an O_DIRECT read ({@link #readDirect}) that bypasses the page cache for
 * streamed experts. Channels are opened once per file and shared; every method is thread-safe.
 */
public final class TensorReader implements AutoCloseable {
    private final DirectIo.Channels channels;

    /** A reader whose one-time notes (O_DIRECT refused) go to standard error. */
    public TensorReader() {
        this(DirectIo.O_DIRECT, s -> System.err.println("k3: note: " + s));
    }

    TensorReader(DirectIo.Opener opener, Consumer<String> notes) {
        this.channels = new DirectIo.Channels(opener, notes);
    }

    /** The tensor's bytes, read with a positional loop into a segment of {@code arena}. */
    public MemorySegment read(TensorInfo t, Arena arena) {
        return read(t.file(), t.offset(), t.length(), t.name(), arena);
    }

    /** {@code length} bytes at absolute {@code offset} of {@code file}; {@code what} names them in errors. */
    public MemorySegment read(Path file, long offset, long length, String what, Arena arena) {
        MemorySegment seg = arena.allocate(length, 64);
        long got;
        try {
            got = DirectIo.read(channel(file), seg, offset, length, false);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, what, "read failed: " + e, e);
        }
        if (got < length) throw shortRead(file, what, got, length);
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
     * O_DIRECT read of {@code [offset, offset+length)}: reads the enclosing {@link DirectIo.Window} into an
     * aligned buffer and returns the requested slice of it. Falls back to {@link #read} (with a one-time
     * note) when O_DIRECT is refused for the file.
     */
    public MemorySegment readDirect(Path file, long offset, long length, String what, Arena arena) {
        FileChannel dc = directChannel(file);
        if (dc == null) return read(file, offset, length, what, arena);
        DirectIo.Window w = DirectIo.Window.around(offset, length);
        MemorySegment seg = DirectIo.allocate(arena, w.length());
        long got;
        try {
            got = DirectIo.read(dc, seg, w.lo(), w.need(), true);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, what, "O_DIRECT read failed: " + e, e);
        }
        if (got < w.need()) throw shortRead(file, what, Math.max(0, got - w.pad()), length);
        return seg.asSlice(w.pad(), length);
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
        try {
            return channels.buffered(file);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, null, "cannot open: " + e, e);
        }
    }

    private FileChannel directChannel(Path file) {
        try {
            return channels.direct(file);
        } catch (IOException e) {
            throw new CheckpointException(Rule.IO, file, null, "cannot open: " + e, e);
        }
    }

    @Override
    public void close() {
        try {
            channels.close();
        } catch (IOException ignored) {
            // read-only channels lose nothing when close fails
        }
    }
}
