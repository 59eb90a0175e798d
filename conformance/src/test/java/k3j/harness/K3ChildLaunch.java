package k3j.harness;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * How a child JVM of a gate starts the {@code k3} command fast: as {@code bin/k3} does, with the JDK's AOT cache
 * (classes loaded and linked, method profiles) made once per test JVM from a training run of the 13-layer oracle.
 * A cache needs a class path of jars, so a {@code k3j.cli.K3} child gets the jars of this JVM's class path (the
 * engine's jar among them, as {@code mvn verify} builds it) and the cache; any other main class, or an engine that is
 * a classes folder (a build that stopped before the jar), starts as before with the whole class path and no cache.
 * The cache changes how fast a child starts, never what it runs: the same classes from the same build.
 */
public final class K3ChildLaunch {
    private K3ChildLaunch() {}

    private static final String K3 = "k3j.cli.K3";

    /** The class-path arguments (and the cache's) that start {@code mainClass}: {@code -cp ...} or {@code -XX:AOTCache=... -cp jars}. */
    public static List<String> classPath(String mainClass) {
        String full = System.getProperty("java.class.path");
        if (K3.equals(mainClass) && Cache.PATH != null) return List.of("-XX:AOTCache=" + Cache.PATH, "-Xlog:aot=off,cds=off", "-cp", Cache.JARS);
        return List.of("-cp", full);
    }

    /** The jars of this JVM's class path, when the engine's classes come from one of them; else null. */
    static String jars() {
        var source = k3j.cli.K3.class.getProtectionDomain().getCodeSource();
        if (source == null || !source.getLocation().getPath().endsWith(".jar")) return null;
        List<String> jars = Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator))
                .filter(e -> e.endsWith(".jar") && Files.isRegularFile(Path.of(e))).toList();
        return jars.isEmpty() ? null : String.join(File.pathSeparator, jars);
    }

    /** Made on first use (the holder idiom: concurrent gates wait for one training run); null when it could not be made. */
    private static final class Cache {
        static final String JARS = jars();
        static final Path PATH = JARS == null ? null : make(JARS);

        private static Path make(String jars) {
            try {
                Path dir = Files.createTempDirectory("k3-child-aot");
                Path cache = dir.resolve("k3.aot"), out = dir.resolve("run.json"), log = dir.resolve("training.log");
                dir.toFile().deleteOnExit();
                for (Path p : List.of(cache, out, log)) p.toFile().deleteOnExit();
                List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-XX:AOTCacheOutput=" + cache,
                        "-cp", jars, K3, Project.fixture("tiny-k3").toString(), "--ids", "250,17,101,3,199,64,128,42,7,230,88,155",
                        "--gen", "8", "--incremental", "--out", out.toString()));
                Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile())
                        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
                if (!p.waitFor(300, TimeUnit.SECONDS)) p.destroyForcibly();
                if (p.isAlive() || p.exitValue() != 0 || !Files.isRegularFile(cache)) {
                    System.err.println("k3 children start without an AOT cache: its training run failed (" + Files.readString(log).strip() + ")");
                    return null;
                }
                return cache;
            } catch (IOException e) {
                System.err.println("k3 children start without an AOT cache: " + e);
                return null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
    }
}
