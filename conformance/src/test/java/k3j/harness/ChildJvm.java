package k3j.harness;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A main class run in a child JVM with this test JVM's java, class path and the launcher's flags: a gate that
 * must see a real process (an exit code, a separate results folder). Output goes to a file, so a chatty child
 * never blocks on a full pipe.
 */
public final class ChildJvm {
    /** The child's exit code and its output (stdout and stderr, the JDK's incubator warning dropped). */
    public record Result(int exit, String output) {}

    private ChildJvm() {}

    /** The heap a child gets unless the caller says otherwise. */
    public static final String DEFAULT_HEAP = "768m";

    /** Runs {@code mainClass args} with {@code -Dkey=value} for each property; fails after {@code timeoutSeconds}. */
    public static Result run(Map<String, String> properties, long timeoutSeconds, String mainClass, String... args) throws IOException, InterruptedException {
        return run(DEFAULT_HEAP, properties, timeoutSeconds, mainClass, args);
    }

    /** {@link #run(Map, long, String, String...)} with a heap of at most {@code heap} ({@code -Xmx}). */
    public static Result run(String heap, Map<String, String> properties, long timeoutSeconds, String mainClass, String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
                "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-Xss4m", "-Xmx" + heap));
        properties.forEach((k, v) -> cmd.add("-D" + k + "=" + v));
        cmd.addAll(K3ChildLaunch.classPath(mainClass));
        cmd.add(mainClass);
        cmd.addAll(List.of(args));
        Path log = Files.createTempFile("k3-child", ".txt");
        try {
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null"))).start();
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(String.join(" ", cmd.subList(cmd.indexOf(mainClass), cmd.size())) + " did not finish within " + timeoutSeconds + " s");
            }
            String text = Files.readString(log, StandardCharsets.UTF_8).lines()
                    .filter(l -> !l.startsWith("WARNING: Using incubator modules"))
                    .reduce("", (a, b) -> a + b + "\n");
            return new Result(p.exitValue(), text);
        } finally {
            Files.deleteIfExists(log);
        }
    }

    /** {@code k3 args} (the k3j.cli.K3 launcher). */
    public static Result k3(String... args) throws IOException, InterruptedException {
        return run(Map.of(), 600, "k3j.cli.K3", args);
    }

    /**
     * {@code k3 args} for each of {@code runs}, independent of one another, one child per core at a time (a set-up's
     * single-threaded children would leave the other core idle one after another); results in the order of {@code runs}.
     */
    public static List<Result> k3All(List<List<String>> runs) throws IOException, InterruptedException {
        int width = Math.max(1, Math.min(runs.size(), Runtime.getRuntime().availableProcessors()));
        try (java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(width)) {
            List<java.util.concurrent.Future<Result>> pending = new ArrayList<>();
            for (List<String> args : runs) pending.add(pool.submit(() -> k3(args.toArray(String[]::new))));
            List<Result> out = new ArrayList<>();
            for (java.util.concurrent.Future<Result> f : pending) {
                try {
                    out.add(f.get());
                } catch (java.util.concurrent.ExecutionException e) {
                    switch (e.getCause()) {
                        case IOException io -> throw io;
                        case InterruptedException ie -> throw ie;
                        case Error err -> throw err;
                        case RuntimeException re -> throw re;
                        default -> throw new IllegalStateException(e.getCause());
                    }
                }
            }
            return out;
        }
    }
}
