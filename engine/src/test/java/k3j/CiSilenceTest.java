package k3j;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * ci/silence.py, the filter ci/test pipes Maven through: a real SIGINT (Ctrl-C reaches the whole pipeline) leaves it
 * passing on what Maven prints while it stops, with no Python traceback, and it still writes its measurement.
 */
class CiSilenceTest {
    @Test
    void ctrlCLeavesTheFilterPassingTheRestWithoutATraceback(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("silence.json");
        Process p = new ProcessBuilder("python3", Repo.path("ci/silence.py").toString(), json.toString()).start();
        String first;
        try (OutputStream in = p.getOutputStream()) {
            in.write("[INFO] compiling\n".getBytes(StandardCharsets.UTF_8));
            in.flush();
            // the filter has echoed the first line, so it is past its SIGINT set-up (a fixed sleep raced a loaded machine)
            first = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8)).readLine();
            new ProcessBuilder("kill", "-INT", String.valueOf(p.pid())).inheritIO().start().waitFor();
            Thread.sleep(300);
            in.write("[INFO] BUILD FAILURE (interrupted)\n".getBytes(StandardCharsets.UTF_8));
        }
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the filter ends when its input does");
        String out = first + "\n" + new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8), err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), err);
        assertFalse(err.contains("Traceback") || err.contains("KeyboardInterrupt"), err);
        assertEquals("[INFO] compiling\n[INFO] BUILD FAILURE (interrupted)\n", out, "what Maven prints while it stops is passed on");
        assertTrue(Files.readString(json).contains("\"seconds\""), "the measurement is written");
    }
}
