package k3j.conform;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import k3j.cli.CliRun;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code k3 conform}: the per-layer lines and verdict, exit codes 0 / 1 / 2, the chart file. */
class ConformCommandTest {
    @Test
    void selectedLayersConformAndTheChartIsWritten(@TempDir Path tmp) throws Exception {
        Path chart = tmp.resolve("chart.svg");
        CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "36-39",
                "--no-logits", "--threads", "1", "--chart", chart.toString());
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("L39 MLA      PASS  9 stages"), r.out());
        assertTrue(r.out().contains("LAYERS 36-39   4 passed, 0 failed   (3 KDA, 1 MLA)"), r.out());
        assertTrue(r.out().contains("VERDICT: ALL LAYERS CONFORM"), r.out());
        assertTrue(Files.readString(chart).startsWith("<svg"));
    }

    @Test
    void aDumpForOtherWeightsExitsOneNamingTheFile() {
        CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--reference", ConformanceTest.DUMPS.resolve("tiny-k3").toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("[reference mismatch]") && r.err().contains("model-00001-of-00002.safetensors"), r.err());
    }

    @Test
    void aLayerOutsideTheModelIsUsage() {
        CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "90-93");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("90-93 is outside 0-92"), r.err());
    }
}
