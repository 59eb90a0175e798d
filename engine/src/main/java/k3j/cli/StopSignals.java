package k3j.cli;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

/**
 * SIGINT and SIGTERM during a generation: the first one asks the run to stop after the token being computed (the
 * run then keeps what it generated, writes its files and exits with {@link ExitCode#INTERRUPTED} or
 * {@link ExitCode#TERMINATED}); a second one, half a second or more later, ends the process at once, with the same
 * code. One sooner is the same signal delivered twice ({@code timeout -s INT} signals the process and then its
 * whole group), not a person's second Ctrl-C. Outside the
 * generation (open, load, plan) the JVM's own handling stays: a signal ends the process. A signal the process was
 * started with ignored (a background job of a script ignores SIGINT) stays ignored.
 */
final class StopSignals implements AutoCloseable {
    private record Installed(sun.misc.Signal signal, sun.misc.SignalHandler previous) {}

    private final List<Installed> installed = new ArrayList<>();
    private static final long REPEAT_NANOS = 500_000_000L;

    private volatile sun.misc.Signal received;
    private volatile long receivedAt;

    /** Handles INT and TERM until {@link #close}; {@code say} is told, once, that the run will stop. */
    StopSignals(Consumer<String> say) {
        for (String name : new String[] {"INT", "TERM"}) {
            sun.misc.Signal s = new sun.misc.Signal(name);
            try {
                installed.add(new Installed(s, sun.misc.Signal.handle(s, got -> {
                    if (received != null) {
                        if (System.nanoTime() - receivedAt >= REPEAT_NANOS) Runtime.getRuntime().halt(code(got));
                        return;
                    }
                    receivedAt = System.nanoTime();
                    received = got;
                    say.accept("k3: SIG" + got.getName() + ": stopping after this token (the tokens so far are kept); SIG" + got.getName() + " again stops at once");
                })));
            } catch (IllegalArgumentException e) {
                // the JVM keeps this signal to itself (-Xrs): its own handling stays
            }
        }
    }

    /** Whether a stop was asked for. */
    boolean requested() {
        return received != null;
    }

    /** "SIGINT" or "SIGTERM", or null. */
    String name() {
        sun.misc.Signal s = received;
        return s == null ? null : "SIG" + s.getName();
    }

    /** The exit code for the signal received (128 + its number, as a shell reports it). */
    int exitCode() {
        return code(received);
    }

    private static int code(sun.misc.Signal s) {
        return s.getName().equals("TERM") ? ExitCode.TERMINATED : ExitCode.INTERRUPTED;
    }

    @Override
    public void close() {
        for (Installed i : installed) sun.misc.Signal.handle(i.signal(), i.previous());
    }
}
