package k3j.compare;

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
        assertTrue(r.out().contains("LAYERS 36-39   4 within budget, 0 not   (3 KDA, 1 MLA)"), r.out());
        assertTrue(r.out().contains("VERDICT: CONFORMS"), r.out());
        assertTrue(Files.readString(chart).startsWith("<svg"));
    }

    @Test
    void aDumpForOtherWeightsIsRefusedNamingTheFile() {
        CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--reference", ConformanceTest.DUMPS.resolve("tiny-k3").toString());
        assertEquals(2, r.exit(), "a refused input exits by its REFUSED verdict");
        assertTrue(r.out().contains("VERDICT: REFUSED"), r.out());
        assertTrue(r.err().contains("[reference mismatch]") && r.err().contains("model-00001-of-00002.safetensors"), r.err());
    }

    /**
     * Under a capped plan (the trunk streamed through a two-slot ring, an expert cache of a few slots) every
     * verdict and stage ratio is bit-identical to the resident run, the plan block is printed, and the expert sweep
     * ({@code --experts}) runs through the same cache.
     */
    @Test
    void aCappedPlanGivesTheResidentRunsBits(@TempDir Path tmp) throws Exception {
        Path trunk = tmp.resolve("trunk");
        CliRun pack = k3("pack-trunk", ConformanceTest.MINI.toString(), trunk.toString());
        assertEquals(0, pack.exit(), pack.out() + pack.err());
        Path resident = tmp.resolve("resident.json"), capped = tmp.resolve("capped.json");
        CliRun a = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "0-12", "--threads", "1",
                "--json", resident.toString());
        assertEquals(0, a.exit(), a.out() + a.err());
        assertTrue(a.out().contains("memory plan") && a.out().contains("trunk (resident)") && a.out().contains("resident once read"), a.out());
        CliRun b = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "0-12", "--threads", "1",
                "--json", capped.toString(), "--trunk", trunk.toString(), "--trunk-gb", "0.001", "--cache-gb", "0.0001", "--experts");
        assertEquals(0, b.exit(), b.out() + b.err());
        assertTrue(b.out().contains("trunk (STREAMED)") && b.out().contains("served by a") && b.out().contains("expert cache: "), b.out());
        assertTrue(b.out().matches("(?s).*EXPERTS: (\\d+) of \\1 swept MoE layers with every expert within budget.*") && b.out().contains("VERDICT: CONFORMS"), "the expert sweep through the cache under the plan: " + b.out());
        // the plan the run wrote before its first layer, and its verdict over exactly that plan
        var plan = json(resident).path("run_plan").path("items");
        assertEquals(16, plan.size(), "13 layers, the logits full and incremental, the greedy ids: " + plan);
        assertEquals("CONFORMS", json(resident).path("verdict").path("outcome").asText(), json(resident).path("verdict").toString());
        assertEquals(0, json(resident).path("verdict").path("not_judged").size());
        assertTrue(json(capped).path("run_plan").path("items").toString().contains("\"L1 experts\""), json(capped).path("run_plan").toString());
        assertEquals(json(capped).path("run_plan").path("items").size(), json(capped).path("verdict").path("judged").size(), "every planned item judged");
        assertTrue(b.out().contains("trunk witness: every layer read from trunk.bin is compared byte for byte with the checkpoint's shards"), b.out());
        var x = json(resident).path("layers");
        var y = json(capped).path("layers");
        assertEquals(13, x.size());
        assertTrue(json(capped).path("expert_cache").path("evictions").asLong() > 0, "the cache must be smaller than what the layers route");
        for (int i = 0; i < x.size(); i++) {
            assertEquals(x.get(i).path("finding").asText(), y.get(i).path("finding").asText());
            var rx = x.get(i).path("ratios_to_budget");
            var ry = y.get(i).path("ratios_to_budget");
            assertEquals(rx.size(), ry.size());
            for (var it = rx.fieldNames(); it.hasNext(); ) {
                String f = it.next();
                assertEquals(Double.doubleToRawLongBits(rx.path(f).asDouble()), Double.doubleToRawLongBits(ry.path(f).asDouble()), "L" + i + " " + f);
            }
        }
    }

    private static com.fasterxml.jackson.databind.JsonNode json(Path p) throws java.io.IOException {
        return new com.fasterxml.jackson.databind.ObjectMapper().readTree(p.toFile());
    }

    @Test
    void aPlanThatDoesNotFitIsRefusedBeforeAnyLayerRuns() {
        System.setProperty("k3.memAvailableBytes", "30000");
        try {
            CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "0");
            assertEquals(1, r.exit(), r.out() + r.err());
            assertTrue(r.out().contains("memory plan") && r.err().contains("REFUSING TO START"), r.out() + r.err());
            assertTrue(!r.out().contains("L0 "), "no layer may run: " + r.out());
        } finally {
            System.clearProperty("k3.memAvailableBytes");
        }
    }

    @Test
    void memoryFlagsWithACandidateAreUsage() {
        CliRun r = k3("conform", "--candidate", ConformanceTest.DUMPS.toString(), "--cache-gb", "1");
        assertEquals(2, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("not with --candidate"), r.err());
    }

    @Test
    void aLayerOutsideTheModelIsUsage() {
        CliRun r = k3("conform", ConformanceTest.MINI.toString(), "--dumps", ConformanceTest.DUMPS.toString(), "--layers", "90-93");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("90-93 is outside 0-92"), r.err());
    }
}
