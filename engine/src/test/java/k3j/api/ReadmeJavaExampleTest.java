package k3j.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.StreamSupport;
import k3j.Repo;
import k3j.cli.CliRun;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The README's Java example, copied out of README.md exactly as written, compiled and run in a child JVM from
 * the repository root against the engine's classes: it must print the ids {@code k3 run} generates for the same
 * prompt, and the verdict of a conforming oracle. A README whose example no longer compiles fails here.
 */
class ReadmeJavaExampleTest {
    private static final Pattern JAVA_BLOCK = Pattern.compile("## From Java\\n.*?```java\\n(.*?)```", Pattern.DOTALL);

    static String example() throws Exception {
        String readme = Files.readString(Repo.path("README.md"));
        Matcher m = JAVA_BLOCK.matcher(readme);
        assertTrue(m.find(), "README.md has a ```java block under '## From Java'");
        return m.group(1);
    }

    @Test
    void theReadmeExampleRunsAndAgreesWithTheCli(@TempDir Path dir) throws Exception {
        String code = example();
        Matcher cls = Pattern.compile("\\bclass (\\w+)").matcher(code);
        assertTrue(cls.find(), "the example declares a class");
        Path src = dir.resolve(cls.group(1) + ".java");
        Files.writeString(src, code);
        Path root = Repo.path("README.md").getParent();
        Path javaBin = Path.of(System.getProperty("java.home"), "bin", "java");
        Process p = new ProcessBuilder(javaBin.toString(), "--add-modules", "jdk.incubator.vector", "-cp", System.getProperty("java.class.path"), src.toString())
                .directory(root.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(5, TimeUnit.MINUTES), "the example finished");
        assertEquals(0, p.exitValue(), "the example exits 0:\n" + out);

        String tiny = root.resolve("oracle-fixtures/tiny-k3").toString();
        Path json = dir.resolve("run.json");
        CliRun cli = CliRun.k3(tiny, "--tok", tiny, "--prompt", "hello", "--gen", "8", "--incremental", "--out", json.toString());
        assertEquals(0, cli.exit(), cli.err());
        List<String> ids = StreamSupport.stream(new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile()).path("generated_ids").spliterator(), false)
                .map(n -> n.asText()).toList();
        assertTrue(!ids.isEmpty(), "the CLI generated ids");
        assertTrue(out.contains(String.join(" ", ids) + " -> "), "the example's token callback saw the CLI's ids " + ids + ":\n" + out);
        assertTrue(out.contains("VERDICT: CONFORMS; every stage conforms: true"), out);
    }
}
