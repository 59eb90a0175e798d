package k3j.kernels;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * A persistent pool with a fixed thread count that splits independent outputs (rows, heads, experts)
 * into contiguous static shares; the caller runs the first share. Every output is computed by exactly one
 * thread in the kernel's fixed order, so the bits never depend on the thread count.
 */
public final class Workers implements AutoCloseable {
    /** The body of a parallel loop: computes outputs [from, to). */
    @FunctionalInterface
    public interface Range {
        void run(int from, int to);
    }

    private static final Workers SERIAL = new Workers(1);

    private final int threads;
    private final ExecutorService pool;

    private Workers(int threads) {
        if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        this.threads = threads;
        this.pool = threads == 1 ? null : Executors.newFixedThreadPool(threads - 1, r -> {
            Thread t = new Thread(r, "k3j-worker");
            t.setDaemon(true);
            return t;
        });
    }

    /** The single-threaded instance (no pool). */
    public static Workers serial() {
        return SERIAL;
    }

    /** A pool of {@code threads} threads in total (the caller counts as one). */
    public static Workers of(int threads) {
        return threads == 1 ? SERIAL : new Workers(threads);
    }

    public int threads() {
        return threads;
    }

    /**
     * This pool for a call of {@code work} multiply-adds that takes the Vector API path ({@link KernelPath}), else the
     * caller alone: a small call's hand-off to the pool (a submit and a wait, tens of microseconds) costs as much as
     * its arithmetic. Threads never change bits, so this is a choice of speed alone.
     */
    Workers forWork(long work) {
        return KernelPath.vector(work) ? this : SERIAL;
    }

    /**
     * Runs body over [0, n) in {@code threads} contiguous shares whose boundaries are multiples of
     * {@code align} (the last share takes the remainder). Exceptions in any share are rethrown.
     */
    public void split(int n, int align, Range body) {
        int units = (n + align - 1) / align;
        int shares = Math.min(threads, units);
        if (shares <= 1) {
            body.run(0, n);
            return;
        }
        int per = (units + shares - 1) / shares * align;
        shares = (n + per - 1) / per; // no empty trailing share
        @SuppressWarnings("unchecked")
        Future<?>[] running = new Future<?>[shares - 1];
        for (int s = 1; s < shares; s++) {
            int from = Math.min(n, s * per), to = Math.min(n, from + per);
            running[s - 1] = pool.submit(() -> body.run(from, to));
        }
        Throwable first = null;
        try {
            body.run(0, Math.min(n, per));
        } catch (RuntimeException | Error e) {
            first = e;
        }
        for (Future<?> f : running) {
            try {
                f.get();
            } catch (ExecutionException e) {
                if (first == null) first = e.getCause();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (first == null) first = e;
            }
        }
        if (first instanceof RuntimeException r) throw r;
        if (first instanceof Error err) throw err;
        if (first != null) throw new IllegalStateException("worker failed", first);
    }

    @Override
    public void close() {
        if (pool != null) pool.shutdownNow();
    }
}
