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
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
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
import k3j.cache.ExpertLoadException;
import k3j.conform.Conformance;
import k3j.conform.ExpertLayerReport;
import k3j.conform.ExpertReport;
import k3j.conform.ExpertSweep;
import k3j.conform.ReferenceDump;
import k3j.harness.Evidence;
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
 * explicitly, as in the mutation gate) and the dump's expert sweep (reference-dumps/FORMAT.md §10).
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

    static List<Corruption> expertSwap(int layer, int a, int b) {
        List<Corruption> out = new ArrayList<>();
        for (String w : List.of("w1", "w2", "w3")) {
            for (String t : List.of("weight_packed", "weight_scale")) {
                out.add(new Corruption.Swap(layer, "block_sparse_moe.experts." + a + "." + w + "." + t, "block_sparse_moe.experts." + b + "." + w + "." + t));
            }
        }
        return out;
    }

    static List<Corruption> gateUpSwap(int layer, int e) {
        String p = "block_sparse_moe.experts." + e + ".";
        return List.of(new Corruption.Swap(layer, p + "w1.weight_packed", p + "w3.weight_packed"), new Corruption.Swap(layer, p + "w1.weight_scale", p + "w3.weight_scale"));
    }

    /** mini-k3-93: 7 experts top-3; the prompt routes 3-4 of them per layer (the experts named here are never selected). */
    static final List<Case> TABLE = List.of(
            new Case("untouched mini-k3-93", List.of(), -1, List.of(), List.of(), null),
            new Case("L38 expert 2 (unrouted) nibble order flipped", List.of(new Corruption.NibbleFlip(38, 2)), 38, List.of(2), List.of("w1", "w2", "w3"),
                    new Candidate.NibbleFlip(2, List.of(ExpertPart.W1_PACKED, ExpertPart.W2_PACKED, ExpertPart.W3_PACKED))),
            new Case("L70 expert 1 (unrouted) w1 <-> w3", gateUpSwap(70, 1), 70, List.of(1), List.of("w1", "w3"), new Candidate.GateUpSwap(1)),
            new Case("L50 expert 1 (unrouted) one w2 scale byte (x2)", List.of(new Corruption.ExpertByte(50, 1, "w2_scale", 5, 1)), 50, List.of(1), List.of("w2"), null),
            new Case("L60 expert 1 (unrouted) one w1 row", List.of(new Corruption.ExpertRow(60, 1, "w1", 7)), 60, List.of(1), List.of("w1"), null),
            new Case("L92 expert 0 (unrouted) one w3 packed byte", List.of(new Corruption.ExpertByte(92, 0, "w3_packed", 100, 0x21)), 92, List.of(0), List.of("w3"), null),
            new Case("L21 experts 0 and 3 (both unrouted) swapped", expertSwap(21, 0, 3), 21, List.of(0, 3), List.of("w1", "w2", "w3"), new Candidate.ExpertSwap(0, 3)));

    static Path mini, dumpDir, scratch;
    static ReferenceDump dump;
    static Workers workers;

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

    /** The experts the dump's ids select in {@code layer} (any token). */
    static TreeSet<Integer> routed(int layer) {
        TreeSet<Integer> s = new TreeSet<>();
        for (int e : dump.i32("layers." + layer + ".moe_idx")) s.add(e);
        return s;
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
            assertEquals(k.experts().getFirst(), d.expert(), "bisect diagnoses the first failing expert");
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
        k3j.cache.ExpertCache[] cache = new k3j.cache.ExpertCache[1];
        try (Conformance c = Conformance.open(model, dump, workers, a -> {
            a.model(true);
            try {
                cache[0] = a.cacheExperts(k3j.cache.ExpertCache.Settings.of(CACHE_BYTES, a.binding().config().topK()), null, n -> {});
            } catch (ExpertLoadException e) {
                throw new AssertionError(e.getMessage(), e);
            }
        })) {
            List<ExpertLayerReport> sweep = c.moeLayers(IntStream.range(0, c.layerCount()).boxed().toList()).stream().map(c::experts).toList();
            k3j.cache.CacheStats st = cache[0].totalStats();
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
    /** True-error bands (x budget) the rate is stated in; from {@link #SURE} up a miss has probability <= 4.4e-6 (k = 16). */
    static final double[] BANDS = {1, 1.5, 2, 3, 10, 100, Double.POSITIVE_INFINITY};
    static final double SURE = 3.0;

    @Test
    void theSketchCatchesEveryCorruptionWellAboveTheBudgetAndItsFalseNegativeRateIsStated() {
        Random rnd = new Random(SEED);
        int invisible = 0, flaggedInvisible = 0, neighboursFailing = 0;
        int[] planted = new int[BANDS.length - 1], caught = new int[BANDS.length - 1];
        double expectedMisses = 0;
        TreeMap<String, int[]> byKind = new TreeMap<>();
        List<String> missed = new ArrayList<>(), missedSure = new ArrayList<>();
        long t0 = System.nanoTime();
        int k;
        try (Conformance base = Conformance.open(mini, dumpDir, List.of(), workers)) {
            ExpertSweep sweep = base.expertSweep();
            k = sweep.sketchSize();
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
                            ExpertReport got = sweep.expert(c.forward(), pr, e);
                            Corruption p = plant.get(key(layer, e));
                            if (p == null) {
                                if (!got.conforms()) neighboursFailing++;
                                continue;
                            }
                            double truth = trueRatio(sweep, pr, base.forward(), c.forward(), e);
                            String kind = p.spec().split(":")[0] + (p instanceof Corruption.ExpertByte b ? " " + b.part().split("_")[1] : "");
                            int[] kc = byKind.computeIfAbsent(kind, x -> new int[3]);
                            kc[0]++;
                            if (!(truth > 1.0)) {
                                invisible++;
                                if (!got.conforms()) flaggedInvisible++;
                                continue;
                            }
                            int band = 0;
                            while (!(truth <= BANDS[band + 1])) band++;
                            planted[band]++;
                            kc[1]++;
                            expectedMisses += ExpertSweep.missProbability(k, truth);
                            if (!got.conforms()) {
                                caught[band]++;
                                kc[2]++;
                            } else {
                                String m = p.spec() + " (true error " + Evidence.format(truth) + "x budget)";
                                missed.add(m);
                                if (truth >= SURE) missedSure.add(m);
                            }
                        }
                    }
                }
            }
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        int visible = IntStream.of(planted).sum(), hit = IntStream.of(caught).sum();
        Evidence.parameter("corruptions", (visible + invisible) + " (" + COPIES + " copies; one per unrouted expert of every MoE layer)");
        Evidence.parameter("caught by the sketch", hit + " of " + visible + " with a true error above the budget");
        Evidence.parameter("false-negative rate", String.format(Locale.ROOT, "%d / %d = %.3g (the chi-square bound predicts %.2f misses)", visible - hit, visible,
                visible == 0 ? Double.NaN : (double) (visible - hit) / visible, expectedMisses));
        int sure = 0, sureHit = 0;
        for (int b = 0; b < planted.length; b++) if (BANDS[b] >= SURE) {
            sure += planted[b];
            sureHit += caught[b];
        }
        Evidence.parameter("false-negative rate above " + Evidence.format(SURE) + "x budget", String.format(Locale.ROOT, "%d / %d (95%% upper bound %.3g; bound per corruption %.2g)",
                sure - sureHit, sure, sure == 0 ? Double.NaN : 3.0 / sure, ExpertSweep.missProbability(k, SURE)));
        Evidence.parameter("true error within budget (invisible by definition)", invisible + ", of which flagged " + flaggedInvisible);
        Evidence.parameter("untouched neighbours failing", neighboursFailing);
        Evidence.parameter("wall s", String.format(Locale.ROOT, "%.1f", seconds));
        StringBuilder table = new StringBuilder("| true error (x budget) | corruptions | caught | missed | P(miss) bound at the band's low edge |\n|---|---:|---:|---:|---:|\n");
        for (int b = 0; b < planted.length; b++) {
            table.append(String.format(Locale.ROOT, "| %s..%s | %d | %d | %d | %.2g |%n", Evidence.format(BANDS[b]), Double.isInfinite(BANDS[b + 1]) ? "inf" : Evidence.format(BANDS[b + 1]),
                    planted[b], caught[b], planted[b] - caught[b], ExpertSweep.missProbability(k, BANDS[b])));
        }
        io.qameta.allure.Allure.description("**The sketch's false-negative rate on random one-byte and one-row corruptions of unrouted experts**\n\n"
                + "True error = max over parts and probes of ||x_corrupt - x_untouched|| / ||x_ref||, computed in full through the engine's expert path.\n\n" + table);
        Map<String, Object> ev = new LinkedHashMap<>();
        byKind.forEach((kk, v) -> ev.put(kk, Map.of("planted", v[0], "above_budget", v[1], "caught", v[2])));
        ev.put("missed", missed);
        Evidence.json("detection by corruption kind", ev);
        Evidence.text("detection by true error", table.toString());

        assertTrue(visible >= 500, "too few visible corruptions to state a rate: " + visible);
        assertEquals(0, neighboursFailing, "an untouched expert next to corrupted ones failed");
        assertEquals(List.of(), missedSure, "the sketch missed corruptions " + Evidence.format(SURE) + "x budget or more above it");
        assertTrue(visible - hit <= expectedMisses + 3 * Math.sqrt(expectedMisses) + 1, "more misses (" + (visible - hit) + ") than the chi-square bound allows (" + expectedMisses + "): " + missed);
    }

    static long key(int layer, int expert) {
        return (long) layer << 32 | expert;
    }

    static String decade(double ratio) {
        int d = (int) Math.floor(Math.log10(ratio));
        return String.format(Locale.ROOT, "1e%d..1e%d", d, d + 1);
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

    /** max over parts and probes of ||x_corrupt − x_untouched|| / ||x_ref|| / budget, unsketched. */
    static double trueRatio(ExpertSweep sweep, ExpertSweep.Probes pr, Forward base, Forward corrupt, int e) {
        Forward.ExpertProbe a, b;
        try {
            a = base.probeExpert(pr.layer(), e, pr.z(), pr.v(), sweep.probes());
            b = corrupt.probeExpert(pr.layer(), e, pr.z(), pr.v(), sweep.probes());
        } catch (ExpertLoadException ex) {
            throw new AssertionError(ex.getMessage(), ex);
        }
        float[][] x = {a.w1(), a.w3(), a.w2(), a.out()}, y = {b.w1(), b.w3(), b.w2(), b.out()};
        double worst = 0;
        for (int j = 0; j < x.length; j++) {
            int width = x[j].length / sweep.probes();
            for (int p = 0; p < sweep.probes(); p++) {
                double d2 = 0;
                for (int i = 0; i < width; i++) {
                    double d = (double) x[j][p * width + i] - y[j][p * width + i];
                    d2 += d * d;
                }
                double n = pr.norm()[(e * sweep.probes() + p) * ExpertSweep.PARTS.size() + j];
                double r = d2 == 0 ? 0 : Math.sqrt(d2) / n / sweep.budget(ExpertSweep.PARTS.get(j));
                worst = Math.max(worst, Double.isNaN(r) ? Double.POSITIVE_INFINITY : r);
            }
        }
        return worst;
    }
}
