package k3j.harness;

import com.code_intelligence.jazzer.utils.Log;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Jazzer's own log without its info level, while the fuzz gate replays its corpus in the build. Jazzer 0.30.0
 * prints an "INFO: Loaded N hooks from …" line per hook class (23 of them) and an "INFO: Instrumented … with custom
 * hooks only" line per class it instruments, for the rest of the test JVM's life. It has no option to quiet them:
 * its {@code Log} writes them to {@code System.err} unless {@code Log.fixOutErr} has fixed its streams, which is
 * Jazzer's own way of choosing them (its command-line driver, which ci/fuzz runs, calls it). Warnings, errors and
 * unprefixed lines still reach stderr; when fuzzing (JAZZER_FUZZ set) everything does.
 */
public final class JazzerLog {
    private JazzerLog() {}

    /** Fixes Jazzer's streams to stdout and an info-free stderr, unless this run fuzzes. */
    public static void withoutInfo() {
        String fuzz = System.getenv("JAZZER_FUZZ");
        if (fuzz != null && !fuzz.isEmpty() && !fuzz.equals("0")) return;
        Log.fixOutErr(System.out, new PrintStream(withoutInfoLines(System.err), true, StandardCharsets.UTF_8));
    }

    /**
     * A stream that passes every line to {@code to} except those starting "INFO: " (Jazzer's info prefix), whole
     * lines at a time: Jazzer prints the prefix and the message in two writes, so a partial line waits for its end.
     */
    static OutputStream withoutInfoLines(OutputStream to) {
        return new OutputStream() {
            private final ByteArrayOutputStream line = new ByteArrayOutputStream();

            @Override
            public synchronized void write(int b) {
                line.write(b);
                if (b == '\n') emit();
            }

            @Override
            public synchronized void flush() {}

            @Override
            public synchronized void close() {
                emit();
            }

            private void emit() {
                byte[] bytes = line.toByteArray();
                line.reset();
                if (bytes.length == 0 || new String(bytes, StandardCharsets.UTF_8).startsWith("INFO: ")) return;
                try {
                    to.write(bytes);
                    to.flush();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        };
    }
}
