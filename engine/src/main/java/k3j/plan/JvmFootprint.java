package k3j.plan;

import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.management.MemoryUsage;
import java.util.Locale;

/**
 * What the running JVM itself occupies before the model is allocated, so that the plan's TOTAL can be set
 * against the measured PEAK RSS: its resident set now (VmRSS), and the parts the JVM reports: the heap
 * (committed, in use, and the maximum it may grow to), metaspace, the code cache, other non-heap pools, and the
 * thread stacks (threads × the configured stack size, an upper bound: untouched stack pages are not resident).
 *
 * @param rss        VmRSS now, or 0 where /proc does not say
 * @param stackBytes bytes reserved per thread stack (-Xss / ThreadStackSize)
 */
public record JvmFootprint(long rss, long heapUsed, long heapCommitted, long heapMax, long metaspace, long codeCache,
                           long otherNonHeap, int threads, long stackBytes) {

    /** Measured from this JVM now. */
    public static JvmFootprint measure() {
        MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
        long meta = 0, code = 0, other = 0;
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() != MemoryType.NON_HEAP || !p.isValid()) continue;
            long committed = p.getUsage().getCommitted();
            String n = p.getName();
            if (n.equals("Metaspace")) meta += committed;                 // includes the compressed class space
            else if (n.equals("Compressed Class Space")) continue;
            else if (n.startsWith("CodeHeap") || n.equals("Code Cache")) code += committed;
            else other += committed;
        }
        return new JvmFootprint(MemInfo.rss().orElse(0), heap.getUsed(), heap.getCommitted(), Math.max(heap.getMax(), 0), meta, code,
                other, ManagementFactory.getThreadMXBean().getThreadCount(), threadStackBytes());
    }

    /** The JVM's ThreadStackSize in bytes (the option is in KiB); 1 MiB, the x86-64 default, if the VM does not say. */
    static long threadStackBytes() {
        try {
            var diag = ManagementFactory.getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            return Long.parseLong(diag.getVMOption("ThreadStackSize").getValue()) * 1024;
        } catch (RuntimeException | LinkageError e) {
            return 1L << 20;
        }
    }

    /** What the JVM adds to the plan: its measured RSS, or where that is unknown the committed parts it reports. */
    public long bytes() {
        return rss > 0 ? rss : heapCommitted + metaspace + codeCache + otherNonHeap + (long) threads * stackBytes;
    }

    /** The detail the plan prints after the JVM's figure. */
    public String detail() {
        return String.format(Locale.ROOT, "(%sheap %s committed, %s in use, may grow to %s; metaspace %s; code cache %s; %d threads x %s stack)",
                rss > 0 ? "measured RSS; " : "", Human.bytes(heapCommitted), Human.bytes(heapUsed), Human.bytes(heapMax),
                Human.bytes(metaspace), Human.bytes(codeCache), threads, Human.bytes(stackBytes));
    }
}
