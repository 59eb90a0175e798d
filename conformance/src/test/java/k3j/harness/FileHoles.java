package k3j.harness;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Where a sparse file holds data, as Linux's {@code lseek(SEEK_DATA / SEEK_HOLE)} reports it: a hole reads as zeros
 * by definition, so a reader may skip it. Elsewhere (another OS, a file system that does not say) there is no
 * answer and the caller reads every byte.
 */
final class FileHoles {
    private static final int O_RDONLY = 0, SEEK_DATA = 3, SEEK_HOLE = 4, ENXIO = 6;
    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = STATE.varHandle(java.lang.foreign.MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle OPEN, LSEEK, CLOSE;

    static {
        boolean linux = System.getProperty("os.name", "").startsWith("Linux");
        var lib = LINKER.defaultLookup();
        OPEN = linux ? LINKER.downcallHandle(lib.find("open").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT)) : null;
        LSEEK = linux ? LINKER.downcallHandle(lib.find("lseek").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
                ValueLayout.JAVA_INT), Linker.Option.captureCallState("errno")) : null;
        CLOSE = linux ? LINKER.downcallHandle(lib.find("close").orElseThrow(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT)) : null;
    }

    private FileHoles() {}

    /** The data extents {start, end} of {@code p} (size {@code size}) in order; null when the system does not say. */
    static List<long[]> data(Path p, long size) {
        if (OPEN == null) return null;
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) OPEN.invokeExact(arena.allocateFrom(p.toAbsolutePath().toString()), O_RDONLY);
            if (fd < 0) return null;
            try {
                MemorySegment state = arena.allocate(STATE);
                List<long[]> out = new ArrayList<>();
                long at = 0;
                while (at < size) {
                    long d = (long) LSEEK.invokeExact(state, fd, at, SEEK_DATA);
                    if (d < 0) {
                        if ((int) ERRNO.get(state, 0L) == ENXIO) break;   // no data from here to the end
                        return null;                                        // SEEK_DATA not supported here
                    }
                    long h = (long) LSEEK.invokeExact(state, fd, d, SEEK_HOLE);
                    if (h < 0) return null;
                    out.add(new long[] {d, h});
                    at = h;
                }
                return out;
            } finally {
                int ignored = (int) CLOSE.invokeExact(fd);
            }
        } catch (Throwable t) {
            return null;
        }
    }

    /** Whether {@code [from, to)} lies wholly in a hole of a file whose data extents are {@code data}. */
    static boolean hole(List<long[]> data, long from, long to) {
        for (long[] e : data) if (e[0] < to && e[1] > from) return false;
        return true;
    }
}
