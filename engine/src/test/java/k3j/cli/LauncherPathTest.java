package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import k3j.Repo;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * bin/k3 picks the JVM a line needs: a help or version line runs without jdk.incubator.vector (so the AOT cache keeps
 * its archived module graph); an oracle-sized model run takes C1 and the scalar kernels; every other model run keeps
 * the Vector API and C2. The launcher runs from a copy of the repository's bin/k3 and ci/jdk.sh against a stand-in
 * JDK whose {@code java} prints the command line it was given, so no JVM starts.
 */
class LauncherPathTest {
    @TempDir
    Path root;

    @BeforeEach
    void copyTheLauncher() throws IOException {
        Files.createDirectories(root.resolve("bin"));
        Files.createDirectories(root.resolve("ci"));
        Files.copy(Repo.path("bin/k3"), root.resolve("bin/k3"));
        Files.copy(Repo.path("ci/jdk.sh"), root.resolve("ci/jdk.sh"));
        Path jar = root.resolve("build/k3/k3.jar");
        Files.createDirectories(jar.getParent());
        Files.writeString(jar, "");   // no engine sources in the copy: the jar is never stale, nothing is built
        Path jdk = Files.createDirectories(root.resolve("jdk/bin"));
        for (String tool : List.of("java", "javac")) {
            Path p = jdk.resolve(tool);
            Files.writeString(p, "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n");
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        Files.writeString(root.resolve("jdk/release"), "JAVA_VERSION=\"25.0.1\"\n");
    }

    private Path bin() {
        return root.resolve("bin/k3");
    }

    /** The java command line bin/k3 would run for {@code args}, one word a line. */
    private List<String> javaLine(String... args) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("bash", bin().toString()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(root.toFile()).redirectErrorStream(true);
        pb.environment().put("JAVA_HOME", root.resolve("jdk").toString());
        pb.environment().put("K3_AOT", "off");
        pb.environment().remove("K3_JAVA_OPTS");
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), out);
        return out.lines().toList();
    }

    private Path model(String name, long shardBytes) throws IOException {
        Path dir = Files.createDirectories(root.resolve(name));
        try (RandomAccessFile f = new RandomAccessFile(dir.resolve("model-00001-of-00001.safetensors").toFile(), "rw")) {
            f.setLength(shardBytes);   // sparse: only the size is read
        }
        return dir;
    }

    private static boolean vectorModule(List<String> line) {
        int i = line.indexOf("--add-modules");
        return i >= 0 && line.get(i + 1).equals("jdk.incubator.vector");
    }

    @Test
    void aHelpOrVersionLineRunsWithoutTheIncubatorModule() throws Exception {
        for (String[] args : List.of(new String[] {"--version"}, new String[] {"-V"}, new String[] {"--help"}, new String[] {},
                new String[] {"run", "--help"}, new String[] {"conform", "-h"})) {
            List<String> line = javaLine(args);
            assertFalse(vectorModule(line), String.join(" ", args) + ": " + line);
            assertTrue(line.contains("-XX:TieredStopAtLevel=1"), String.join(" ", args) + ": " + line);
        }
        List<String> more = javaLine("--version", "--out", "x");   // not a help/version line alone
        assertTrue(vectorModule(more), more.toString());
    }

    @Test
    void anOracleSizedRunTakesTheScalarKernelsWithC1() throws Exception {
        Path tiny = model("tiny", 5 << 20);
        for (List<String> line : List.of(javaLine(tiny.toString(), "--ids", "1,2", "--gen", "3"),
                javaLine("run", tiny.toString(), "--ids", "1,2"))) {
            assertTrue(vectorModule(line), line.toString());
            assertTrue(line.contains("-XX:TieredStopAtLevel=1"), line.toString());
            assertEquals(List.of("--kernels", "scalar"), line.subList(line.size() - 2, line.size()), line.toString());
        }
    }

    @Test
    void aLargerModelKeepsTheVectorApiAndC2() throws Exception {
        Path big = model("big", 17L << 20);
        List<String> line = javaLine(big.toString(), "--ids", "1,2", "--gen", "3");
        assertTrue(vectorModule(line), line.toString());
        assertFalse(line.contains("-XX:TieredStopAtLevel=1"), line.toString());
        assertFalse(line.contains("scalar"), line.toString());
        assertTrue(line.contains("-XX:+UseParallelGC"), line.toString());
    }

    @Test
    void aRunThatNamesItsKernelsIsLeftAsAsked() throws Exception {
        Path tiny = model("tiny", 5 << 20);
        for (String kernels : List.of("--kernels=vector", "--kernels")) {
            List<String> line = kernels.contains("=") ? javaLine(tiny.toString(), "--ids", "1", kernels)
                    : javaLine(tiny.toString(), "--ids", "1", kernels, "vector");
            assertFalse(line.contains("-XX:TieredStopAtLevel=1"), line.toString());
            assertFalse(line.contains("scalar"), line.toString());
        }
    }
}
