package k3j.trunk;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import k3j.io.DirectIo;

/**
 * Large aligned off-heap buffers for O_DIRECT reads. On Linux: an anonymous {@code mmap} aligned to 2 MiB
 * with {@code madvise(MADV_HUGEPAGE)} (docs/semantics.md §5.4: transparent huge pages where the kernel only gives
 * them on request), so a 2 GB slot is neither zero-filled up front nor pinned page by 4 KiB page for each
 * O_DIRECT read; unmapped when the arena closes. Elsewhere, or when {@code huge} is off (K3_NOHUGE), or if
 * mmap fails: {@link Arena#allocate} aligned to 4096. No numeric effect either way.
 */
@SuppressWarnings("restricted")   // mmap and madvise through the FFM linker: the launcher enables native access
final class AlignedMemory {
    static final long HUGE = 2L << 20;
    private static final int PROT_READ_WRITE = 0x3, MAP_PRIVATE_ANONYMOUS = 0x22, MADV_HUGEPAGE = 14;
    private static final MethodHandle MMAP, MUNMAP, MADVISE;

    static {
        MethodHandle mmap = null, munmap = null, madvise = null;
        try {
            if (System.getProperty("os.name", "").startsWith("Linux")) {
                Linker linker = Linker.nativeLinker();
                var libc = linker.defaultLookup();
                mmap = linker.downcallHandle(libc.find("mmap").orElseThrow(), FunctionDescriptor.of(ValueLayout.ADDRESS,
                        ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_LONG));
                munmap = linker.downcallHandle(libc.find("munmap").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
                madvise = linker.downcallHandle(libc.find("madvise").orElseThrow(),
                        FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
            }
        } catch (RuntimeException | LinkageError e) {
            mmap = munmap = madvise = null;   // no native access: fall back to the arena
        }
        MMAP = mmap;
        MUNMAP = munmap;
        MADVISE = madvise;
    }

    private AlignedMemory() {}

    /** {@code bytes} (rounded up to 4096, or to 2 MiB when huge) of zeroed memory, aligned to match, freed with {@code arena}. */
    static MemorySegment allocate(Arena arena, long bytes, boolean huge) {
        long align = huge && bytes >= HUGE ? HUGE : DirectIo.ALIGN;
        long len = TrunkManifest.roundUp(bytes, align);
        if (MMAP != null && huge) {
            long mapLen = len + align;
            try {
                MemorySegment base = (MemorySegment) MMAP.invokeExact(MemorySegment.NULL, mapLen, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0L);
                if (base.address() != -1L && base.address() != 0) {
                    long at = TrunkManifest.roundUp(base.address(), align) - base.address();
                    MemorySegment mapped = base.reinterpret(mapLen, arena, s -> unmap(s, mapLen));
                    MemorySegment seg = mapped.asSlice(at, len);
                    int ignored = (int) MADVISE.invokeExact(seg, len, MADV_HUGEPAGE);   // a hint: refusal changes nothing
                    return seg;
                }
            } catch (Throwable e) {
                // fall through to the arena
            }
        }
        return arena.allocate(len, align);
    }

    private static void unmap(MemorySegment s, long len) {
        try {
            int ignored = (int) MUNMAP.invokeExact(s, len);
        } catch (Throwable e) {
            // the process keeps the mapping; nothing reads it again
        }
    }
}
