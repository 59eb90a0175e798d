package k3j.kernels;

import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

/**
 * A persistent pool with a fixed thread count. A parallel loop over independent outputs (rows, heads, experts) is cut
 * into contiguous chunks of equal size, several per thread, which the threads claim in turn (the caller takes part),
 * so a thread slowed by other work on the machine takes fewer chunks and all finish together. Every output is computed
 * by exactly one thread in the kernel's fixed order, so the bits never depend on the thread count or on which thread
 * took which chunk.
 *
 * <p>The helpers stay on the pool between loops: after a loop each one spins for {@link #SPIN_NANOS} before it parks,
 * so the next kernel of a step reaches it without a wake-up. A loop started while another caller holds the pool (two
 * sequences, or a loop inside a loop) runs on its caller alone: same outputs, no waiting on each other.
 */
public final class Workers implements AutoCloseable {
    /** The body of a parallel loop: computes outputs [from, to). */
    @FunctionalInterface
    public interface Range {
        void run(int from, int to);
    }

    /** Chunks per thread: enough that a slowed thread's share moves to the others, few enough that a claim is rare. */
    static final int CHUNKS_PER_THREAD = 4;
    /** How long an idle helper spins for the next loop before it parks (a park and an unpark cost tens of microseconds). */
    static final long SPIN_NANOS = 50_000;

    private static final Workers SERIAL = new Workers(1);

    private final int threads;
    private final Thread[] helpers;
    private final AtomicInteger owner = new AtomicInteger();    // 1 while a caller's loop holds the helpers
    private volatile Loop current;
    private volatile boolean closed;

    /** One parallel loop: its chunks are claimed through {@code next} and counted done in {@code done}. */
    private static final class Loop {
        final Range body;
        final int n, per, chunks;
        final Thread caller;
        final AtomicInteger next = new AtomicInteger(), done = new AtomicInteger();
        final AtomicReference<Throwable> failure = new AtomicReference<>();

        Loop(Range body, int n, int per, Thread caller) {
            this.body = body;
            this.n = n;
            this.per = per;
            this.chunks = (n + per - 1) / per;
            this.caller = caller;
        }

        /** Claims and runs chunks until none is left; true when this thread finished the loop's last chunk. */
        boolean drain() {
            boolean last = false;
            for (int c; (c = next.getAndIncrement()) < chunks; ) {
                int from = c * per, to = Math.min(n, from + per);
                try {
                    body.run(from, to);
                } catch (Throwable t) {
                    failure.compareAndSet(null, t);
                }
                last = done.incrementAndGet() == chunks;
            }
            return last;
        }
    }

    private Workers(int threads) {
        if (threads < 1) throw new IllegalArgumentException("threads must be >= 1, got " + threads);
        this.threads = threads;
        this.helpers = new Thread[threads - 1];
        for (int i = 0; i < helpers.length; i++) {
            Thread t = new Thread(this::helperLoop, "k3j-worker");
            t.setDaemon(true);
            helpers[i] = t;
            t.start();
        }
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
     * caller alone: a small call's hand-off to the pool costs as much as its arithmetic. Threads never change bits, so
     * this is a choice of speed alone.
     */
    Workers forWork(long work) {
        return KernelPath.vector(work) ? this : SERIAL;
    }

    /**
     * Runs body over [0, n) in contiguous chunks whose boundaries are multiples of {@code align} (the last chunk takes
     * the remainder), {@link #CHUNKS_PER_THREAD} per thread, claimed by the threads in turn. Exceptions in any chunk
     * are rethrown (the first one recorded).
     */
    public void split(int n, int align, Range body) {
        int units = (n + align - 1) / align;
        if (threads == 1 || units <= 1 || !owner.compareAndSet(0, 1)) {
            body.run(0, n);
            return;
        }
        Loop loop;
        try {
            int wanted = Math.min(units, threads * CHUNKS_PER_THREAD);
            loop = new Loop(body, n, (units + wanted - 1) / wanted * align, Thread.currentThread());
            current = loop;
            for (Thread h : helpers) LockSupport.unpark(h);
            loop.drain();
            long spinUntil = System.nanoTime() + SPIN_NANOS;
            while (loop.done.get() < loop.chunks) {
                if (System.nanoTime() < spinUntil) Thread.onSpinWait();
                else LockSupport.park(this);
            }
            current = null;
        } finally {
            owner.set(0);
        }
        Throwable first = loop.failure.get();
        if (first instanceof RuntimeException r) throw r;
        if (first instanceof Error err) throw err;
        if (first != null) throw new IllegalStateException("worker failed", first);
    }

    private void helperLoop() {
        Loop seen = null;
        while (!closed) {
            long spinUntil = System.nanoTime() + SPIN_NANOS;
            Loop l;
            while (((l = current) == null || l == seen) && !closed) {
                if (System.nanoTime() < spinUntil) Thread.onSpinWait();
                else LockSupport.park(this);
            }
            if (closed) return;
            seen = l;
            if (l.drain()) LockSupport.unpark(l.caller);
        }
    }

    @Override
    public void close() {
        if (helpers.length == 0) return;
        closed = true;
        for (Thread h : helpers) LockSupport.unpark(h);
    }
}
