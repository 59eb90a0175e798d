package k3j.trunk;

import java.io.PrintStream;
import java.util.Locale;
import k3j.plan.Human;

/**
 * A progress line for long copies. On a terminal: one line redrawn in place with a carriage return (at most
 * five times a second); otherwise (a log, a pipe) a plain line every {@code every} items, as the C packer
 * printed. Hand-written rather than a library: a carriage return is all a one-line bar needs, and
 * me.tongfei:progressbar would bring JLine into the shaded jar for it.
 */
public final class Progress {
    private final PrintStream out;
    private final String verb;
    private final int items;
    private final long totalBytes;
    private final boolean terminal;
    private final int every;
    private final long start = System.nanoTime();
    private long lastDraw;

    public Progress(PrintStream out, String verb, int items, long totalBytes, boolean terminal, int every) {
        this.out = out;
        this.verb = verb;
        this.items = items;
        this.totalBytes = totalBytes;
        this.terminal = terminal;
        this.every = Math.max(1, every);
    }

    /** To standard output, redrawn in place when it is a terminal. */
    public static Progress stdout(String verb, int items, long totalBytes) {
        var c = System.console();
        return new Progress(System.out, verb, items, totalBytes, c != null && c.isTerminal(), 10);
    }

    /** A fresh progress over the same items and bytes, for the next phase (e.g. "verified" after "packed"). */
    public Progress next(String nextVerb) {
        return new Progress(out, nextVerb, items, totalBytes, terminal, every);
    }

    /** A progress that prints nothing. */
    public static Progress silent() {
        return new Progress(null, "", 0, 0, false, 1);
    }

    /** {@code done} items and {@code bytes} bytes are complete. */
    public void update(int done, long bytes) {
        if (out == null) return;
        double s = (System.nanoTime() - start) / 1e9;
        double rate = s > 0 ? bytes / 1e6 / s : 0;
        if (terminal) {
            long now = System.nanoTime();
            if (done < items && now - lastDraw < 200_000_000L) return;
            lastDraw = now;
            int width = 30;
            int filled = totalBytes > 0 ? (int) (width * (double) bytes / totalBytes) : 0;
            String eta = rate > 0 && bytes < totalBytes ? String.format(Locale.ROOT, " ETA %.0f s", (totalBytes - bytes) / 1e6 / rate) : "";
            out.printf(Locale.ROOT, "\r%s [%s%s] %d/%d, %s/%s, %s/s%s   ", verb, "#".repeat(filled), " ".repeat(width - filled),
                    done, items, Human.bytes(bytes), Human.bytes(totalBytes), Human.bytes(rate * 1e6), eta);
            if (done == items) out.println();
            out.flush();
        } else if (done % every == 0 || done == items) {
            out.printf(Locale.ROOT, "  %s %d/%d, %s, %.1f s (%s/s)%n", verb, done, items, Human.bytes(bytes), s, Human.bytes(rate * 1e6));
        }
    }
}
