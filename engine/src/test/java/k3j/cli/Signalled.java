package k3j.cli;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@code k3 args...} in its own JVM, sent a real signal ({@code kill -INT|-TERM pid}) once the STEP table has
 * started (after = 0) or once {@code after} ids have streamed to stdout. The JVM is started with SIGINT at its
 * default disposition: a child of a non-interactive shell's background job inherits SIGINT ignored, and a JVM
 * leaves an ignored SIGINT ignored.
 */
record Signalled(int exit, String out, String err) {
    private static final String RESET_SIGINT = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])";

    static Signalled run(Path cwd, String signal, int after, String... args) throws Exception {
        return run(cwd, signal, after == 0 ? (out, err) -> err.contains("STEP") : (out, err) -> out.chars().filter(ch -> ch == ',').count() >= after, args);
    }

    /** {@code k3 args...} signalled once {@code ready} holds of its stdout and stderr so far. */
    static Signalled run(Path cwd, String signal, java.util.function.BiPredicate<String, String> ready, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of("python3", "-c", RESET_SIGINT, Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx512m",
                "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"), "k3j.cli.K3"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(cwd.toFile()).start();
        p.getOutputStream().close();
        ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
        Thread o = pump(p.getInputStream(), out), e = pump(p.getErrorStream(), err);
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (!ready.test(text(out), text(err)) && p.isAlive() && System.nanoTime() < end) Thread.sleep(5);
        if (!p.isAlive() || System.nanoTime() >= end) {
            p.destroyForcibly();
            throw new AssertionError("k3 ended or stalled before the signal could be sent:\n" + text(out) + text(err));
        }
        new ProcessBuilder("kill", "-" + signal, String.valueOf(p.pid())).inheritIO().start().waitFor();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("k3 did not stop within 120 s of SIG" + signal);
        }
        o.join(5000);
        e.join(5000);
        return new Signalled(p.exitValue(), text(out), text(err).replace("WARNING: Using incubator modules: jdk.incubator.vector\n", ""));
    }

    private static String text(ByteArrayOutputStream b) {
        synchronized (b) {
            return b.toString(StandardCharsets.UTF_8);
        }
    }

    private static Thread pump(InputStream in, ByteArrayOutputStream into) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[4096];
            try (in) {
                for (int n; (n = in.read(buf)) > 0; ) {
                    synchronized (into) {
                        into.write(buf, 0, n);
                    }
                }
            } catch (IOException ex) {
                throw new UncheckedIOException(ex);
            }
        }, "signalled-pump");
        t.setDaemon(true);
        t.start();
        return t;
    }
}
