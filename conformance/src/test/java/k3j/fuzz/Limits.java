package k3j.fuzz;

import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.function.Consumer;

/**
 * The fuzz property's bounds, stated once. Every input must end, in a clean refusal or a valid result, within
 * {@link #SECONDS_PER_INPUT} seconds (enforced by Jazzer's {@code -timeout} when fuzzing and by the gate's JUnit
 * timeout when replaying) and allocate at most {@link #MAX_ALLOCATED_BYTES} on the calling thread (checked
 * here, from the JVM's per-thread allocation counter). The fuzz inputs are at most a few KB, so a reader
 * that allocates past the cap was sized by a number in the input, which is the bug this guards against.
 */
public final class Limits {
    public static final long MAX_ALLOCATED_BYTES = 256L << 20;
    public static final int SECONDS_PER_INPUT = 10;

    private static final com.sun.management.ThreadMXBean THREADS = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    private Limits() {}

    /** Runs one target on one input; an input that allocates past the cap is a finding (an AssertionError). */
    public static void check(String target, byte[] data, Consumer<byte[]> run) {
        long before = THREADS.getCurrentThreadAllocatedBytes();
        run.accept(data);
        long allocated = THREADS.getCurrentThreadAllocatedBytes() - before;
        if (allocated > MAX_ALLOCATED_BYTES) {
            throw new AssertionError(String.format(Locale.ROOT, "%s: a %d-byte input allocated %.1f MB, more than the %d MB cap", target, data.length,
                    allocated / 1e6, MAX_ALLOCATED_BYTES >> 20));
        }
    }
}
