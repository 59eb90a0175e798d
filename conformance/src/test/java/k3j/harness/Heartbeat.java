package k3j.harness;

import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * A line on the console when a long step starts, one every {@value #PERIOD_SECONDS} s while it runs, and one
 * with its time when it ends, so that a gate running for minutes is never silent.
 */
public final class Heartbeat implements AutoCloseable {
    /** Seconds between two "still running" lines. */
    public static final long PERIOD_SECONDS = 20;

    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "heartbeat");
        t.setDaemon(true);
        return t;
    });

    private final String what;
    private final long start = System.nanoTime();
    private final ScheduledFuture<?> beat;

    private Heartbeat(String what) {
        this.what = what;
        System.out.println(what + " ...");
        beat = TIMER.scheduleAtFixedRate(() -> System.out.printf(Locale.ROOT, "%s: still running after %.0f s%n", what, seconds()),
                PERIOD_SECONDS, PERIOD_SECONDS, TimeUnit.SECONDS);
    }

    /** Starts reporting {@code what}; close it when the step ends. */
    public static Heartbeat of(String what) {
        return new Heartbeat(what);
    }

    private double seconds() {
        return (System.nanoTime() - start) / 1e9;
    }

    @Override
    public void close() {
        beat.cancel(false);
        System.out.printf(Locale.ROOT, "%s: done in %.1f s%n", what, seconds());
    }
}
