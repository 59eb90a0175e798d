package k3j.cli;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * {@code k3 args...} in its own JVM, as a shell runs it: its own working folder, {@code stdin} piped in, stdout and
 * stderr apart (the JVM's incubator-module warning dropped from stderr, as bin/k3 drops it).
 */
record ChildK3(int exit, String out, String err) {
    static ChildK3 run(Path cwd, String stdin, String... args) {
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx512m",
                // as bin/k3 runs an oracle-sized model: C1 alone and the serial collector (its CPU is compilation, not
                // arithmetic) with a small young generation
                "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xms24m", "-Xmn8m", "--add-modules",
                "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"), "k3j.cli.K3"));
        cmd.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(cmd).directory(cwd.toFile()).start();
            CompletableFuture<byte[]> out = CompletableFuture.supplyAsync(() -> readAll(p.getInputStream()));
            CompletableFuture<byte[]> err = CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
            try (var in = p.getOutputStream()) {
                in.write(stdin.getBytes(StandardCharsets.UTF_8));
            }
            if (!p.waitFor(300, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("k3 " + String.join(" ", args) + " did not end within 300 s");
            }
            String e = new String(err.join(), StandardCharsets.UTF_8).replace("WARNING: Using incubator modules: jdk.incubator.vector\n", "");
            return new ChildK3(p.exitValue(), new String(out.join(), StandardCharsets.UTF_8), e);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    private static byte[] readAll(java.io.InputStream in) {
        try {
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
