package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Epic;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import k3j.bisect.Corruption;
import k3j.cache.ExpertLocation;
import k3j.config.ConfigReader;
import k3j.dump.ReferenceDump;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ScaleCopies;
import k3j.harness.ScaleFixture;
import k3j.harness.ScaleTrunk;
import k3j.io.CheckpointIndex;
import k3j.model.Binder;
import k3j.plan.Human;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: at the released model's widths (hidden 7168, KDA 96x128, MLA 96 heads, 896 experts top-16 over latent
 * 3584, dense 33792, vocab 163840) every layer of the scale fixture, run alone from its float64 reference dump's
 * inputs, matches every stage within the rounding budget and routes every token like the reference; the same
 * conformance in bounded memory (the trunk streamed through one ring slot, the routed experts through an expert
 * cache of a few slots, far smaller than one layer's routed experts) gives every verdict and ratio bit for bit
 * and peaks within its printed plan plus a stated overhead; and bisect, under that same plan, names a swapped
 * pair of routed experts.
 *
 * <p>Each conformance runs as {@code k3 conform --json} in a child JVM, so its peak RSS (VmHWM) is the whole
 * process's. Data: the fixture ({@link ScaleFixture#underTest()}), its dump {@code reference-dumps/scale-k3}, the
 * plan's caps and overhead in {@code oracle-fixtures/scale-k3/manifest.json} ({@code bounded_memory}); the packed
 * trunk from {@link k3j.harness.ScaleTrunk}, the corrupted copy from {@link ScaleCopies} (both shared with the other scale
 * gates).
 */
@Tag("scale")
@Epic("scale: the released widths")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ScaleConformanceGate {
    static Path model, dump, trunk, work;
    static JsonNode bounds;
    static Run resident, capped;

    /** A child's --json report, what it printed and its wall time. */
    record Run(JsonNode json, String output, double seconds) {}

    @BeforeAll
    static void prepare() throws Exception {
        model = ScaleFixture.underTest().dir();
        dump = Project.dump("scale-k3");
        bounds = Project.json(Project.fixture("scale-k3/manifest.json")).path("bounded_memory");
        if (bounds.isMissingNode()) throw new AssertionError("gate data missing: oracle-fixtures/scale-k3/manifest.json has no bounded_memory section");
        work = Files.createDirectories(Project.root().resolve("build/scale-work"));
        trunk = ScaleTrunk.of(model);   // packed once per test JVM, shared by the scale gates
        // the resident plan counts every routed expert read and repacked (the manifest's resident_why): its baseline runs as if the machine held that
        // and a heap for the repacked experts the forward keeps (resident_heap)
        resident = conform("resident", bounds.path("resident_heap").asText(), Map.of("k3.memAvailableBytes", bounds.path("resident_mem_available_bytes").asText()),
                List.of());
        capped = conform("capped", ChildJvm.DEFAULT_HEAP, Map.of(), cappedFlags());
    }

    /** The capped plan: the manifest's trunk budget, ring and expert-cache budget over the packed trunk. */
    static List<String> cappedFlags() {
        return List.of("--trunk", trunk.toString(), "--preset", bounds.path("preset").asText(), "--trunk-gb", bounds.path("trunk_gb").asText(),
                "--trunk-ring", bounds.path("trunk_ring").asText(), "--cache-gb", bounds.path("cache_gb").asText());
    }

    /** {@code k3 conform MODEL --reference DUMP --no-logits --json} in a child JVM with {@code flags}. */
    static Run conform(String name, String heap, Map<String, String> properties, List<String> flags) throws Exception {
        Path out = work.resolve(name + ".json");
        Files.deleteIfExists(out);
        List<String> args = new ArrayList<>(List.of("conform", model.toString(), "--reference", dump.toString(), "--no-logits", "--threads", "2",
                "--json", out.toString()));
        args.addAll(flags);
        long t0 = System.nanoTime();
        ChildJvm.Result r = ChildJvm.run(heap, properties, 1800, "k3j.cli.K3", args.toArray(String[]::new));
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.println("== k3 conform (" + name + "), " + String.format(Locale.ROOT, "%.1f s", secs) + "\n" + r.output());
        if (!Files.exists(out)) throw new AssertionError(name + ": k3 conform exited " + r.exit() + " without its --json:\n" + r.output());
        return new Run(Project.json(out), r.output(), secs);
    }

    static Stream<Integer> layers() {
        return IntStream.range(0, Project.json(Project.dump("scale-k3").resolve("manifest.json")).path("layers").size()).boxed();
    }

    @ParameterizedTest(name = "L{0} conforms at the released widths")
    @MethodSource("layers")
    @Order(1)
    void everyLayerConformsAtTheReleasedWidths(int layer) {
        JsonNode r = resident.json().path("layers").get(layer);
        assertTrue(r != null && r.path("layer").asInt() == layer, "the resident run reported no layer " + layer + ":\n" + resident.output());
        Evidence.parameter("kind", r.path("kind").asText());
        Evidence.parameter("verdict", r.path("finding").asText());
        Evidence.parameter("seconds", String.format(Locale.ROOT, "%.1f", r.path("seconds").asDouble()));
        r.path("ratios_to_budget").properties().forEach(e -> Evidence.parameter(e.getKey(), Evidence.format(e.getValue().asDouble()) + "x budget"));
        // the decision's own word on this layer (docs/semantics.md §10.11): judged, and no finding names it
        JsonNode v = resident.json().path("verdict");
        String name = "L" + layer + " ";
        boolean judged = false, found = false;
        for (JsonNode j : v.path("judged")) judged |= (j.asText() + " ").startsWith(name);
        for (JsonNode j : v.path("findings")) found |= j.asText().startsWith(name);
        assertTrue(judged && !found, "L" + layer + ": " + r.path("message").asText() + "\n" + v);
    }

    @Test
    @Order(2)
    void theWorstRatioOfEveryStageAtTheReleasedWidths() {
        Map<String, Double> worst = new LinkedHashMap<>();
        Map<String, String> where = new LinkedHashMap<>();
        for (JsonNode r : resident.json().path("layers")) {
            r.path("ratios_to_budget").properties().forEach(e -> {
                if (!(e.getValue().asDouble() <= worst.getOrDefault(e.getKey(), -1.0))) {
                    worst.put(e.getKey(), e.getValue().asDouble());
                    where.put(e.getKey(), "L" + r.path("layer").asInt() + " " + r.path("kind").asText());
                }
            });
        }
        StringBuilder table = new StringBuilder(String.format(Locale.ROOT, "%-16s %-12s %s%n", "stage", "worst ratio", "layer"));
        worst.forEach((k, v) -> table.append(String.format(Locale.ROOT, "%-16s %-12.3g %s%n", k, v, where.get(k))));
        for (JsonNode r : resident.json().path("layers")) {
            table.append(String.format(Locale.ROOT, "L%d %s: %s, %.1f s%n", r.path("layer").asInt(), r.path("kind").asText(), r.path("finding").asText(),
                    r.path("seconds").asDouble()));
        }
        System.out.println("== per-stage worst ratio to budget at the released widths\n" + table);
        Evidence.text("per-stage worst ratio at the released widths", table.toString());
        Evidence.json("per-stage worst ratio (doubles)", worst);
        worst.forEach((k, v) -> Evidence.parameter(k, Evidence.format(v) + "x budget"));
        assertEquals("CONFORMS", resident.json().path("verdict").path("outcome").asText(), "the run's verdict at the released widths: " + worst);
    }

    @Test
    @Order(3)
    void boundedMemoryGivesTheResidentVerdictsAndRatiosBitForBit() {
        JsonNode a = resident.json().path("layers"), b = capped.json().path("layers");
        JsonNode cache = capped.json().path("expert_cache"), plan = capped.json().path("plan");
        assertTrue(plan.path("trunk_streamed").asBoolean() && !cache.isMissingNode(), "the capped run must stream the trunk and cache the experts:\n" + capped.output());
        long layerExperts = Binder.bind(CheckpointIndex.open(model), ConfigReader.read(model.resolve("config.json")), 2).layers().get(1).experts().stream()
                .mapToLong(ExpertLocation::length).sum();
        long cacheBytes = cache.path("slots").asLong() * cache.path("slot_bytes").asLong();
        Evidence.parameter("expert cache", cache.path("slots").asLong() + " slots, " + Human.bytes(cacheBytes));
        Evidence.parameter("one layer's routed experts", Human.bytes(layerExperts));
        Evidence.parameter("cache misses / evictions", cache.path("misses").asLong() + " / " + cache.path("evictions").asLong());
        assertTrue(cacheBytes * 10 < layerExperts, "the cache must be far smaller than one layer's routed experts: " + cacheBytes + " vs " + layerExperts);
        assertTrue(cache.path("evictions").asLong() > 0, "the cache must evict: the prompt routes more experts than it holds");
        assertEquals(a.size(), b.size(), "layers reported");
        int compared = 0;
        for (int i = 0; i < a.size(); i++) {
            JsonNode x = a.get(i), y = b.get(i);
            assertEquals(x.path("finding").asText(), y.path("finding").asText(), "L" + i + " verdict");
            for (String field : List.of("ratios_to_budget", "max_abs_diff")) {
                assertEquals(x.path(field).size(), y.path(field).size(), "L" + i + " " + field + " stages");
                for (var e : x.path(field).properties()) {
                    assertEquals(Double.doubleToRawLongBits(e.getValue().asDouble()), Double.doubleToRawLongBits(y.path(field).path(e.getKey()).asDouble()),
                            "L" + i + " " + field + " " + e.getKey() + ": resident " + e.getValue() + ", capped " + y.path(field).path(e.getKey()));
                    compared++;
                }
            }
        }
        Evidence.parameter("doubles compared bit for bit", compared);
    }

    @Test
    @Order(4)
    void eachRunPeaksWithinItsPlan() {
        long overhead = bounds.path("overhead_bytes").asLong();
        Map<String, Object> fig = new LinkedHashMap<>();
        for (Run r : List.of(resident, capped)) {
            String name = r == resident ? "resident" : "capped";
            long peak = r.json().path("peak_rss_bytes").asLong(-1), total = r.json().path("plan").path("total_bytes").asLong(-1);
            assertTrue(peak > 0 && total > 0, name + ": no peak RSS or plan in the --json:\n" + r.output());
            fig.put(name, Map.of("peak_rss_bytes", peak, "plan_total_bytes", total, "wall_seconds", r.seconds(), "peak_over_total", (double) peak / total));
            Evidence.parameter(name + " peak RSS / plan TOTAL", Human.bytes(peak) + " / " + Human.bytes(total));
        }
        fig.put("overhead_bytes", overhead);
        fig.put("overhead_why", bounds.path("overhead_why").asText());
        Evidence.json("peak RSS against the plan", fig);
        System.out.println("== peak RSS against the plan: " + fig);
        long peak = capped.json().path("peak_rss_bytes").asLong(), total = capped.json().path("plan").path("total_bytes").asLong();
        assertTrue(peak <= total + overhead, "the capped run peaked at " + Human.bytes(peak) + ", over its plan TOTAL " + Human.bytes(total)
                + " + the stated overhead " + Human.bytes(overhead));
        assertTrue(peak < resident.json().path("peak_rss_bytes").asLong(), "the capped run must hold less than the resident one");
    }

    @Test
    @Order(5)
    void bisectUnderThePlanNamesASwappedExpertPair() throws Exception {
        int layer = bounds.path("bisect").path("layer").asInt();
        int a = bounds.path("bisect").path("experts").get(0).asInt(), b = bounds.path("bisect").path("experts").get(1).asInt();
        int budget = bounds.path("bisect").path("budget").asInt();
        int[] routed = ReferenceDump.open(dump).i32("layers." + layer + ".moe_idx");
        assertTrue(IntStream.of(routed).anyMatch(e -> e == a) && IntStream.of(routed).anyMatch(e -> e == b), "experts " + a + " and " + b + " must be routed in L" + layer);
        List<Corruption> swap = new ArrayList<>();
        for (String part : List.of("w1.weight_packed", "w1.weight_scale", "w2.weight_packed", "w2.weight_scale", "w3.weight_packed", "w3.weight_scale")) {
            swap.add(new Corruption.Swap(layer, "block_sparse_moe.experts." + a + "." + part, "block_sparse_moe.experts." + b + "." + part));
        }
        Path copy = ScaleCopies.of(model, "expert-pair", swap);   // shared with K3jReferenceScaleGate, which judges the same copy
        List<String> args = new ArrayList<>(List.of("bisect", copy.toString(), "--reference", dump.toString(), "--layers", String.valueOf(layer),
                "--threads", "2", "--budget", String.valueOf(budget)));
        args.addAll(cappedFlags());
        long t0 = System.nanoTime();
        ChildJvm.Result r = ChildJvm.run(Map.of(), 1800, "k3j.cli.K3", args.toArray(String[]::new));
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.println("== k3 bisect (swapped experts " + a + " and " + b + " of L" + layer + "), " + String.format(Locale.ROOT, "%.1f s", secs) + "\n" + r.output());
        Evidence.text("k3 bisect", r.output());
        String tried = r.output().lines().filter(l -> l.startsWith("diagnosis of L")).findFirst().orElse("");
        Evidence.parameter("bisect wall", String.format(Locale.ROOT, "%.1f s", secs));
        Evidence.parameter("diagnosis", tried);
        assertEquals(1, r.exit(), "bisect must fail the layer:\n" + r.output());
        String want = "L" + layer + ": experts " + Math.min(a, b) + " and " + Math.max(a, b) + " are swapped";
        assertTrue(r.output().contains("  " + want), "bisect must name the pair (" + want + ") within " + budget + " candidates:\n" + r.output());
    }
}
