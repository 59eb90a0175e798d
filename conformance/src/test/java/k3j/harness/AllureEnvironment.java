package k3j.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.platform.launcher.LauncherSession;
import org.junit.platform.launcher.LauncherSessionListener;

/**
 * Writes environment.properties (JDK, OS, CPU, model path) and the committed categories.json into
 * the Allure results folder once per test JVM, so every report says where and on what it ran; a gate that
 * learns more while running (the reference dump it found) adds it with {@link #put}.
 */
public final class AllureEnvironment implements LauncherSessionListener {
    private static final Map<String, String> ENV = new LinkedHashMap<>();

    /** Sets one line of the report's environment (rewriting environment.properties), e.g. the dump actually used. */
    public static synchronized void put(String key, String value) {
        ENV.put(key, orDash(value));
        write();
    }

    @Override
    public void launcherSessionOpened(LauncherSession session) {
        synchronized (AllureEnvironment.class) {
            fill(ENV);
            write();
        }
    }

    private static void fill(Map<String, String> env) {
        env.put("jdk", System.getProperty("java.vm.vendor") + " " + System.getProperty("java.runtime.version"));
        env.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version") + " " + System.getProperty("os.arch"));
        env.put("cpu", cpuModel() + ", " + Runtime.getRuntime().availableProcessors() + " cores");
        env.put("vector.api", ModuleLayer.boot().findModule("jdk.incubator.vector").isPresent() ? "present" : "absent");
        env.put("k3.model", orDash(Project.property("k3.model")));
        env.put("k3.reference", orDash(Project.property("k3.reference")));
        env.put("k3.layers", orDash(Project.property("k3.layers")));
        env.put("k3.candidate", orDash(Project.property("k3.candidate")));
    }

    private static void write() {
        String dir = System.getProperty("allure.results.directory", "");
        if (dir.isBlank()) return;
        Path results = Path.of(dir);
        try {
            Files.createDirectories(results);
            Files.writeString(results.resolve("environment.properties"), ENV.entrySet().stream()
                    .map(e -> e.getKey() + "=" + e.getValue().replace("\\", "\\\\"))
                    .collect(Collectors.joining("\n", "", "\n")));
            Path categories = Project.root().resolve("reports/categories.json");
            if (Files.exists(categories)) {
                Files.copy(categories, results.resolve("categories.json"), StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the Allure environment into " + results, e);
        }
    }

    private static String orDash(String s) {
        return s.isBlank() ? "-" : s;
    }

    private static String cpuModel() {
        try {
            return Files.readAllLines(Path.of("/proc/cpuinfo")).stream()
                    .filter(l -> l.startsWith("model name"))
                    .map(l -> l.substring(l.indexOf(':') + 1).trim())
                    .findFirst().orElse(System.getProperty("os.arch"));
        } catch (IOException | RuntimeException e) {
            return System.getProperty("os.arch");
        }
    }
}
