package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import k3j.bisect.Bisect;
import k3j.bisect.Candidate;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.bisect.LayerConformance;
import k3j.bisect.LayerRunner;
import k3j.cache.ExpertPart;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.ExpertSweep;
import k3j.dump.ReferenceDump;
import k3j.harness.Caught;
import k3j.harness.DetectionTally;
import k3j.harness.Evidence;
import k3j.harness.ExpertSweeps;
import k3j.harness.Project;
import k3j.kernels.Workers;
import k3j.model.Forward;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: the expert sweep checks EVERY routed expert, not only the ones the dump's prompt routes. A corrupted
 * expert that the prompt never selects (a nibble order, w1 and w3 swapped, one scale byte, one row, two experts
 * swapped) leaves per-layer conformance all green, yet fails the sweep at exactly that layer, naming the expert
 * and the projection (w1 / w2 / w3) whose own probe fails, and {@code k3 bisect}, given that expert as the
 * failing stage, names the mix-up when it is one it tries (nibble order, w1/w3 swap, expert swap) and says
 * "nothing explains it" otherwise; the untouched checkpoint passes with every expert checked; through the expert
 * cache of a memory plan (evicting throughout) the sweep names the same expert. And the sketch's
 * false-negative rate, measured on 1000+ random one-byte and one-row corruptions of unrouted experts against
 * their true (unsketched) error, is stated by band: none is missed from 3 budgets up (a miss there has
 * probability ≤ 4.4e-6), and the misses below stay within the chi-square bound.
 *
 * <p>Data: copies of mini-k3-93 written by {@link Corruptions} (headers unchanged; the reference dump is passed
 * explicitly, as in the mutation gate) and the dump's expert sweep (docs/formats.md §7.10).
 */
@Tag("experts")
@Epic("experts")
class ExpertsGate {
    /** One corruption of unrouted experts of one layer; the experts and the projections the sweep must name. */
    record Case(String name, List<Corruption> corruptions, int layer, List<Integer> experts, List<String> projections, Candidate verdict) {
        @Override
        public String toString() {
            return name;
        }
    }

    /** mini-k3-93: 7 experts top-3; the prompt routes 3-4 of them per layer (the experts named here are never selected). */
    static final List<Case> TABLE = List.of(
            new Case("untouched mini-k3-93", List.of(), -1, List.of(), List.of(), null),
            new Case("L38 expert 2 (unrouted) nibble order flipped", List.of(new Corruption.NibbleFlip(38, 2)), 38, List.of(2), List.of("w1", "w2", "w3"),
                    new Candidate.NibbleFlip(2, List.of(ExpertPart.W1_PACKED, ExpertPart.W2_PACKED, ExpertPart.W3_PACKED))),
            new Case("L70 expert 1 (unrouted) w1 <-> w3", ExpertSweeps.gateUpSwap(70, 1), 70, List.of(1), List.of("w1", "w3"), new Candidate.GateUpSwap(1)),
            new Case("L50 expert 1 (unrouted) one w2 scale byte (x2)", List.of(new Corruption.ExpertByte(50, 1, "w2_scale", 5, 1)), 50, List.of(1), List.of("w2"), null),
            new Case("L60 expert 1 (unrouted) one w1 row", List.of(new Corruption.ExpertRow(60, 1, "w1", 7)), 60, List.of(1), List.of("w1"), null),
            new Case("L92 expert 0 (unrouted) one w3 packed byte", List.of(new Corruption.ExpertByte(92, 0, "w3_packed", 100, 0x21)), 92, List.of(0), List.of("w3"), null),
            new Case("L21 experts 0 and 3 (both unrouted) swapped", ExpertSweeps.expertSwap(21, 0, 3), 21, List.of(0, 3), List.of("w1", "w2", "w3"), new Candidate.ExpertSwap(0, 3)));

    static Path mini, dumpDir, scratch;
    static ReferenceDump dump;
    static Workers workers;

    /** The report's row for a planted expert corruption: the layer and expert the sweep fails, its finding and ratio. */
    static Caught caught(Case k, List<ExpertLayerReport> failingSweep) {
        String planted = k.name();
        if (failingSweep.isEmpty()) return Caught.missed("expert corruption", planted);
        ExpertLayerReport r = failingSweep.getFirst();
        ExpertReport worst = r.worst(1).getFirst();
        return new Caught("expert corruption", planted, r.layer(), "expert " + worst.expert(), worst.message().replaceFirst("^(\\[[^\\]]+\\]).*", "$1"), r.worstRatioToBudget());
    }

    @BeforeAll
    static void open() throws IOException {
        mini = Project.fixture("mini-k3-93");
        dumpDir = Project.dump("mini-k3-93");
        dump = ReferenceDump.open(dumpDir);
        scratch = Files.createTempDirectory("k3j-experts-");
        workers = Workers.of(2);
    }

    @AfterAll
    static void close() throws IOException {
        if (workers != null) workers.close();
        Project.deleteTree(scratch);
    }

    static Stream<Case> table() {
        if (TABLE.isEmpty()) fail("the corruption table is empty");
        return TABLE.stream();
    }

    static TreeSet<Integer> routed(int layer) {
        return ExpertSweeps.routed(dump, layer);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("table")
    void theSweepNamesAnUnroutedCorruptedExpertWhilePromptConformanceStaysGreen(Case k) {
        for (int e : k.experts()) assertFalse(routed(k.layer()).contains(e), "the table's premise: L" + k.layer() + " expert " + e + " is never routed by the dump's prompt");
        Path model = mini;
        if (!k.corruptions().isEmpty()) {
            model = scratch.resolve("case-" + TABLE.indexOf(k));
            Corruptions.write(mini, model, k.corruptions());
        }
        Evidence.parameter("corruption", k.corruptions().isEmpty() ? "none" : String.join(" + ", k.corruptions().stream().map(Corruption::spec).toList()));
        long t0 = System.nanoTime();
        try (Conformance c = Conformance.open(model, dumpDir, List.of(), workers); LayerRunner runner = new LayerRunner(c.model(), workers)) {
            Bisect.Report report = Bisect.run(new LayerConformance(c), runner, IntStream.range(0, c.layerCount()).boxed().toList(), true);
            double seconds = (System.nanoTime() - t0) / 1e9;
            List<ExpertLayerReport> sweep = report.experts();
            List<ExpertLayerReport> failingSweep = sweep.stream().filter(r -> !r.conforms()).toList();
            if (!k.corruptions().isEmpty()) caught(k, failingSweep).attach();
            int checked = sweep.stream().mapToInt(ExpertLayerReport::checked).sum(), total = sweep.stream().mapToInt(ExpertLayerReport::total).sum();
            Evidence.parameter("prompt-based conformance", report.failing().isEmpty() ? "all " + report.layers().size() + " layers conform" : "failing " + report.failing());
            Evidence.parameter("experts checked", checked + " of " + total);
            Evidence.parameter("sweep", failingSweep.isEmpty() ? "every expert conforms" : String.join("; ", failingSweep.stream().map(ExpertLayerReport::message).toList()));
            Evidence.parameter("expected verdict", k.layer() < 0 ? "-" : k.verdict() == null ? "unexplained" : k.verdict().describe());
            Evidence.parameter("bisect", report.summary());
            Evidence.parameter("wall s", String.format(Locale.ROOT, "%.2f", seconds));
            Evidence.text("sweep", String.join("\n", sweep.stream().map(ExpertLayerReport::line).toList()));

            assertEquals(List.of(), report.failing(), "the prompt routes none of the corrupted experts: per-layer conformance must stay green");
            assertEquals(total, checked, "experts checked: " + checked + " of " + total);
            if (k.layer() < 0) {
                assertEquals(List.of(), report.failingExperts(), "the untouched checkpoint's experts all conform: " + report.summary());
                assertNull(report.expertDiagnosis());
                return;
            }
            assertEquals(List.of(k.layer()), report.failingExperts(), "exactly the corrupted layer's sweep fails");
            ExpertLayerReport r = failingSweep.getFirst();
            Evidence.parameter("worst ratio to budget", r.worstRatioToBudget());
            assertEquals(k.experts(), r.failing().stream().map(ExpertReport::expert).sorted().toList(), "the sweep names exactly the corrupted experts: " + r.message());
            for (ExpertReport e : r.failing()) {
                assertEquals(k.projections(), e.failingProjections(), "L" + k.layer() + " expert " + e.expert() + ": the failing projections name the corruption: " + e.message());
                assertTrue(e.message().startsWith("[binding error] L" + k.layer() + " expert " + e.expert() + ": "), e.message());
            }
            Bisect.ExpertDiagnosis d = report.expertDiagnosis();
            assertNotNull(d, "bisect is given the failing expert as its failing stage");
            assertTrue(report.summary().startsWith("L" + k.layer() + " "), "the summary names the layer: " + report.summary());
            assertEquals(r.worst(1).getFirst().expert(), d.expert(), "bisect diagnoses the worst failing expert");
            assertEquals(k.verdict() == null ? List.of() : List.of(k.verdict()), d.explanations(), "bisect's verdict: " + d.summary());
            if (k.verdict() == null) assertTrue(d.summary().contains("nothing explains it"), d.summary());
        }
    }

    /**
     * Under a memory plan the routed experts come from the expert cache: the sweep reads every expert through it (a
     * cache of 200 KB, 16 slots of mini's 12 KB experts, for 644 experts: it evicts throughout) and reaches the same
     * verdict as the resident run.
     */
    static final long CACHE_BYTES = 200_000;

    @Test
    void theSweepThroughTheExpertCacheNamesTheSameExpert() throws IOException {
        Path model = scratch.resolve("cached");
        Corruptions.write(mini, model, List.of(new Corruption.NibbleFlip(38, 2)));
        try (ExpertSweeps.Cached cached = ExpertSweeps.throughCache(model, dump, workers, CACHE_BYTES)) {
            Conformance c = cached.conformance();
            List<ExpertLayerReport> sweep = c.moeLayers(IntStream.range(0, c.layerCount()).boxed().toList()).stream().map(c::experts).toList();
            k3j.cache.CacheStats st = cached.cache().totalStats();
            Evidence.parameter("cache", st.requests() + " requests, " + st.misses() + " misses, " + st.evictions() + " evictions");
            Evidence.parameter("experts checked", sweep.stream().mapToInt(ExpertLayerReport::checked).sum() + " of " + sweep.stream().mapToInt(ExpertLayerReport::total).sum());
            assertEquals(List.of(38), sweep.stream().filter(r -> !r.conforms()).map(ExpertLayerReport::layer).toList(), "the cached sweep fails exactly L38");
            assertEquals(List.of(2), sweep.stream().filter(r -> r.layer() == 38).findFirst().orElseThrow().failing().stream().map(ExpertReport::expert).toList());
            assertTrue(st.misses() >= 644 && st.evictions() > 0, "every expert came through the cache, evicting: " + st);
        }
    }

    // ------------------------------------------------------------------ false-negative rate

    static final long SEED = 12;
    static final int COPIES = 3;

    /**
     * Every unrouted expert of every MoE layer gets one random small corruption per copy (a packed byte XOR a
     * random mask, a scale byte halved or doubled, or one row shifted); each is judged by the sketch and by its
     * true error ||x_corrupt − x_untouched|| / ||x_ref|| per part, computed in full through the same expert path.
     */
    @Test
    void theSketchCatchesEveryCorruptionWellAboveTheBudgetAndItsFalseNegativeRateIsStated() {
        Random rnd = new Random(SEED);
        int neighboursFailing = 0;
        DetectionTally tally = null;
        long t0 = System.nanoTime();
        try (Conformance base = Conformance.open(mini, dumpDir, List.of(), workers)) {
            ExpertSweep sweep = base.expertSweep();
            tally = new DetectionTally(sweep.sketchSize());
            int lt = base.model().config().latentSize(), inter = base.model().config().moeIntermediate();
            List<Integer> moe = base.moeLayers(IntStream.range(0, base.layerCount()).boxed().toList());
            for (int copy = 0; copy < COPIES; copy++) {
                Map<Long, Corruption> plant = new LinkedHashMap<>();
                for (int layer : moe) {
                    TreeSet<Integer> routed = routed(layer);
                    for (int e = 0; e < base.model().config().expertCount(); e++) if (!routed.contains(e)) plant.put(key(layer, e), random(rnd, layer, e, lt, inter));
                }
                Path model = scratch.resolve("random-" + copy);
                Corruptions.write(mini, model, List.copyOf(plant.values()));
                try (Conformance c = Conformance.open(model, dumpDir, List.of(), workers)) {
                    for (int layer : moe) {
                        ExpertSweep.Probes pr = sweep.probes(layer);
                        for (int e = 0; e < pr.experts(); e++) {
                            Forward.ExpertProbe b = DetectionTally.probe(c.forward(), sweep, pr, e);
                            ExpertReport got = sweep.judge(pr, e, b, false);
                            Corruption p = plant.get(key(layer, e));
                            if (p == null) {
                                if (!got.conforms()) neighboursFailing++;
                                continue;
                            }
                            Forward.ExpertProbe a = DetectionTally.probe(base.forward(), sweep, pr, e);
                            String kind = p.spec().split(":")[0] + (p instanceof Corruption.ExpertByte eb ? " " + eb.part().split("_")[1] : "");
                            tally.add(kind, p.spec(), DetectionTally.trueRatio(sweep, pr, a, b, e), !got.conforms());
                        }
                    }
                }
            }
        }
        Evidence.parameter("corruptions", tally.total() + " (" + COPIES + " copies; one per unrouted expert of every MoE layer)");
        Evidence.parameter("untouched neighbours failing", neighboursFailing);
        tally.evidence("random one-byte and one-row corruptions of unrouted experts", (System.nanoTime() - t0) / 1e9);
        assertEquals(0, neighboursFailing, "an untouched expert next to corrupted ones failed");
        tally.check(500);
    }

    static long key(int layer, int expert) {
        return (long) layer << 32 | expert;
    }

    /** A packed byte XOR a random mask (50%), a scale byte's lowest bit (x2 or /2 of a group, 25%), a row shifted (25%). */
    static Corruption random(Random rnd, int layer, int expert, int lt, int inter) {
        String w = List.of("w1", "w2", "w3").get(rnd.nextInt(3));
        int rows = w.equals("w2") ? lt : inter, cols = w.equals("w2") ? inter : lt;
        double u = rnd.nextDouble();
        if (u < 0.5) return new Corruption.ExpertByte(layer, expert, w + "_packed", rnd.nextInt(rows * cols / 2), 1 + rnd.nextInt(255));
        if (u < 0.75) return new Corruption.ExpertByte(layer, expert, w + "_scale", rnd.nextInt(rows * cols / 32), 1);
        return new Corruption.ExpertRow(layer, expert, w, rnd.nextInt(rows));
    }
}
