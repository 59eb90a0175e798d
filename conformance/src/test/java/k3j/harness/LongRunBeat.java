package k3j.harness;

import java.util.Deque;
import java.util.Locale;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.TestPlan;

/**
 * Keeps every gate audible: while a test or a class's set-up runs, a line names it every
 * {@value Heartbeat#PERIOD_SECONDS} s, so no gate is silent on the console for longer than that, whether or not
 * it uses a {@link Heartbeat} of its own. Registered for the whole suite through
 * {@code META-INF/services/org.junit.platform.launcher.TestExecutionListener}; quick tests print nothing.
 */
public final class LongRunBeat implements TestExecutionListener {
    private record Running(TestIdentifier id, long startNanos) {}

    private final Deque<Running> running = new ConcurrentLinkedDeque<>();
    private volatile long lastBeatNanos = System.nanoTime();
    private ScheduledExecutorService timer;

    @Override
    public void testPlanExecutionStarted(TestPlan plan) {
        timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "long-run-beat");
            t.setDaemon(true);
            return t;
        });
        timer.scheduleAtFixedRate(this::beat, 1, 1, TimeUnit.SECONDS);
    }

    @Override
    public void testPlanExecutionFinished(TestPlan plan) {
        if (timer != null) timer.shutdownNow();
    }

    @Override
    public void executionStarted(TestIdentifier id) {
        running.push(new Running(id, System.nanoTime()));
    }

    @Override
    public void executionFinished(TestIdentifier id, TestExecutionResult result) {
        running.removeIf(r -> r.id().equals(id));
    }

    /** "FaultsGate › aShortShardIsRefused()": the class named too, since a method name alone is ambiguous. */
    private static String name(TestIdentifier id) {
        return id.getSource().filter(MethodSource.class::isInstance).map(MethodSource.class::cast)
                .map(m -> m.getClassName().substring(m.getClassName().lastIndexOf('.') + 1) + " › " + id.getDisplayName())
                .orElse(id.getDisplayName());
    }

    /** The innermost step that has run a whole period since it started and since the last line. */
    private void beat() {
        Running r = running.peekFirst();
        long now = System.nanoTime(), period = TimeUnit.SECONDS.toNanos(Heartbeat.PERIOD_SECONDS);
        if (r == null || now - r.startNanos() < period || now - lastBeatNanos < period) return;
        lastBeatNanos = now;
        System.out.printf(Locale.ROOT, "  ... %s: still running after %.0f s%n", name(r.id()), (now - r.startNanos()) / 1e9);
    }
}
