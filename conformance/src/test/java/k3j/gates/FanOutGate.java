package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Claim: per-layer conformance fans out over machines without changing a verdict. The 93-layer oracle's
 * checkpoint conformance run as 4 separate shard processes ({@code -Dk3.layers}, each writing its own Allure
 * results, as 4 runners would), merged by {@code ci/report DIR...} into one report, gives case by case the
 * verdicts of one process running all layers: the same 93 layer cases, each once, with the same status,
 * message and per-stage ratios, and one overview per shard.
 */
@Tag("fanout")
@Epic("fan-out")
class FanOutGate {
    static final String GATE = "k3j.gates.LayerConformanceGate";
    static final List<String> SHARDS = List.of("0-23", "24-46", "47-69", "70-92");
    static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void fourShardProcessesMergeToTheSingleRunsVerdictsCaseByCase(@TempDir Path tmp) throws Exception {
        Allure.feature("mini-k3-93 in 4 shards");
        Path single = tmp.resolve("single");
        List<String> dirs = new ArrayList<>();
        // the single run and the 4 shards, two processes at a time (a runner each, on 2 cores)
        try (ExecutorService pool = Executors.newFixedThreadPool(2)) {
            List<Future<ChildJvm.Result>> runs = new ArrayList<>(List.of(pool.submit(() -> shard(single, ""))));
            for (int s = 0; s < SHARDS.size(); s++) {
                Path d = tmp.resolve("shard-" + s);
                String range = SHARDS.get(s);
                runs.add(pool.submit(() -> shard(d, range)));
                dirs.add(d.toString());
            }
            for (int i = 0; i < runs.size(); i++) {
                // evidence and verdicts on this thread: Allure attaches to the case's own thread
                String range = i == 0 ? "all layers" : SHARDS.get(i - 1);
                ChildJvm.Result r = runs.get(i).get();
                Evidence.text("shard " + range, r.output());
                assertEquals(0, r.exit(), "shard " + range + ":\n" + r.output());
            }
        }
        Path report = tmp.resolve("report"), merged = tmp.resolve("merged");
        List<String> cmd = new ArrayList<>(List.of(Project.root().resolve("ci/report").toString()));
        cmd.addAll(dirs);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(tmp.resolve("report.log").toFile());
        pb.environment().put("K3_REPORT_OUT", report.toString());
        pb.environment().put("K3_REPORT_MERGED", merged.toString());
        pb.environment().put("K3_REPORT_HISTORY", "none"); // a proof's report, not a run of the project's history
        Process p = pb.start();
        if (!p.waitFor(300, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            fail("ci/report did not finish in 300 s");
        }
        String log = Files.readString(tmp.resolve("report.log"));
        Evidence.text("ci/report " + String.join(" ", SHARDS), log);
        assertEquals(0, p.exitValue(), "ci/report:\n" + log);
        assertTrue(Files.isRegularFile(report.resolve("index.html")), "the merged report has no index.html");

        Map<String, List<JsonNode>> one = cases(single), all = cases(merged);
        Evidence.parameter("single run", one.size() + " cases");
        Evidence.parameter("merged shards", all.size() + " cases");
        List<String> layerCases = one.keySet().stream().filter(n -> n.matches("L\\u2007?\\d+ .*")).toList();
        assertEquals(93, layerCases.size(), "the single run's layer cases");
        List<String> differ = new ArrayList<>();
        for (String name : layerCases) {
            List<JsonNode> m = all.getOrDefault(name, List.of());
            if (m.size() != 1) {
                differ.add(name + ": " + m.size() + " cases in the merged results");
                continue;
            }
            String a = verdict(one.get(name).getFirst()), b = verdict(m.getFirst());
            if (!a.equals(b)) differ.add(name + ":\n  single " + a + "\n  merged " + b);
        }
        long mergedLayers = all.keySet().stream().filter(n -> n.matches("L\\u2007?\\d+ .*")).count();
        assertEquals(93, mergedLayers, "layer cases in the merged results (none lost, none extra)");
        assertTrue(differ.isEmpty(), "cases whose verdict differs:\n" + String.join("\n", differ));
        for (String s : SHARDS) {
            assertEquals(1, all.getOrDefault("overview: layers " + s + " x stages", List.of()).size(), "one overview for shard " + s + "; merged cases: " + all.keySet());
        }
        Evidence.parameter("layer cases equal", layerCases.size() + "/93");
    }

    /** One shard process: the checkpoint gate on mini-k3-93 with -Dk3.layers=RANGE ("" = all) into {@code results}. */
    static ChildJvm.Result shard(Path results, String layers) throws IOException, InterruptedException {
        Files.createDirectories(results);
        return ChildJvm.run(Map.of("k3.root", Project.root().toString(), "k3.model", Project.fixture("mini-k3-93").toString(),
                "k3.layers", layers, "allure.results.directory", results.toString()), 600, "k3j.harness.ShardRun", GATE);
    }

    /** The Allure result files of a folder, by case name. */
    static Map<String, List<JsonNode>> cases(Path dir) throws IOException {
        Map<String, List<JsonNode>> m = new TreeMap<>();
        try (Stream<Path> s = Files.list(dir)) {
            for (Path p : s.filter(f -> f.getFileName().toString().endsWith("-result.json")).toList()) {
                JsonNode n = JSON.readTree(Files.readString(p, StandardCharsets.UTF_8));
                m.computeIfAbsent(n.path("name").asText(), k -> new ArrayList<>()).add(n);
            }
        }
        if (m.isEmpty()) fail("gate data missing: no Allure result in " + dir);
        return m;
    }

    /** What a reader compares: status, failure message and every parameter but the timing and JUnit's invocation id. */
    static String verdict(JsonNode result) {
        StringBuilder sb = new StringBuilder(result.path("status").asText()).append(" | ").append(result.path("statusDetails").path("message").asText(""));
        for (JsonNode p : result.path("parameters")) {
            String name = p.path("name").asText();
            if (!name.equals("seconds") && !name.equals("UniqueId")) sb.append(" | ").append(p.path("name").asText()).append('=').append(p.path("value").asText());
        }
        return sb.toString();
    }
}
