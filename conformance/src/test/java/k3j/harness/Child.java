package k3j.harness;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A {@code k3} command (or another main class of the test classpath) in its own JVM, so that a gate can kill it,
 * limit the file sizes it may write ({@code ulimit -f}) or truncate a file under it, and read what it printed
 * line by line as it prints. Bounded: a child that outlives {@link #MAX_SECONDS} is killed and the case fails.
 */
public final class Child implements AutoCloseable {
    public static final int MAX_SECONDS = 300;

    private final Process process;
    private final List<String> out = new ArrayList<>(), err = new ArrayList<>();
    private final Thread outReader, errReader;

    private Child(Process p) {
        this.process = p;
        this.outReader = pump(p.getInputStream(), out);
        this.errReader = pump(p.getErrorStream(), err);
    }

    /** {@code k3 args...} in a child JVM. */
    public static Child k3(String... args) {
        return main(null, "k3j.cli.K3", args);
    }

    /** {@code k3 args...} in a child JVM whose regular-file writes are limited to {@code fileSizeKb} KiB ({@code ulimit -f}). */
    public static Child k3Limited(int fileSizeKb, String... args) {
        return main(fileSizeKb, "k3j.cli.K3", args);
    }

    /** Any main class of the test classpath. */
    public static Child main(Integer fileSizeKb, String mainClass, String... args) {
        List<String> cmd = new ArrayList<>();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        if (fileSizeKb != null) cmd.addAll(List.of("bash", "-c", "ulimit -f " + fileSizeKb + " && exec \"$@\"", "k3-child"));
        cmd.addAll(List.of(java, "-Xmx512m", "-XX:-UsePerfData", "--add-modules", "jdk.incubator.vector",
                "--enable-native-access=ALL-UNNAMED"));
        cmd.addAll(K3ChildLaunch.classPath(mainClass));
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        try {
            return new Child(new ProcessBuilder(cmd).start());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static Thread pump(java.io.InputStream in, List<String> into) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    synchronized (into) {
                        into.add(line);
                        into.notifyAll();
                    }
                }
            } catch (IOException ignored) {
                // the child died: what it printed is kept
            }
        }, "child-pump");
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Writes {@code data} to the child's stdin and closes it (on a thread of its own, so a child that stops reading cannot block the caller). */
    public Child stdin(byte[] data) {
        Thread t = new Thread(() -> {
            try (java.io.OutputStream in = process.getOutputStream()) {
                in.write(data);
            } catch (IOException ignored) {
                // the child stopped reading (it refused the input): what it printed says why
            }
        }, "child-stdin");
        t.setDaemon(true);
        t.start();
        return this;
    }

    /** Waits until a stdout line matches (true), or the child ends first (false). */
    public boolean awaitOut(Predicate<String> line) {
        return await(out, outReader, line);
    }

    /** Waits until a stderr line matches (true), or the child ends first (false): a run's report is on stderr. */
    public boolean awaitErr(Predicate<String> line) {
        return await(err, errReader, line);
    }

    private boolean await(List<String> lines, Thread reader, Predicate<String> line) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(MAX_SECONDS);
        synchronized (lines) {
            int seen = 0;
            while (System.nanoTime() < end) {
                for (; seen < lines.size(); seen++) if (line.test(lines.get(seen))) return true;
                if (!process.isAlive() && !reader.isAlive()) return false;
                try {
                    lines.wait(50);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        return false;
    }

    /** The exit code (the child is killed, and the case fails, past {@link #MAX_SECONDS}). */
    public int exitCode() {
        try {
            if (!process.waitFor(MAX_SECONDS, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                throw new AssertionError("the child did not end within " + MAX_SECONDS + " s (a hang): " + String.join("\n", out()));
            }
            outReader.join(5000);
            errReader.join(5000);
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    /** SIGKILL, and wait for it to be gone. */
    public int kill() {
        process.destroyForcibly();
        return exitCode();
    }

    public long pid() {
        return process.pid();
    }

    public List<String> out() {
        synchronized (out) {
            return List.copyOf(out);
        }
    }

    public List<String> err() {
        synchronized (err) {
            return List.copyOf(err);
        }
    }

    /** stdout and stderr, for failure messages and evidence. */
    public String transcript() {
        return "--- stdout\n" + String.join("\n", out()) + "\n--- stderr\n" + String.join("\n", err());
    }

    @Override
    public void close() {
        if (process.isAlive()) process.destroyForcibly();
    }
}
