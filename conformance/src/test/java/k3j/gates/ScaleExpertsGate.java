package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.ExpertSweep;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.harness.DetectionTally;
import k3j.harness.Evidence;
import k3j.harness.ExpertSweeps;
import k3j.harness.PatchedExperts;
import k3j.harness.Project;
import k3j.harness.ScaleFixture;
import k3j.kernels.Workers;
import k3j.model.Forward;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: at the released widths (896 experts per MoE layer, latent 3584, intermediate 3072) the expert sweep
 * checks every expert of every MoE layer, not only the ones the prompt routes. On the untouched scale fixture
 * every expert conforms, "experts checked: 896 of 896" per layer, the sparse holes compared as exact zeros and
 * exactly the experts its manifest lists with data run through the kernels. A corruption of an expert the
 * dump's prompt never routes but that holds real data (two experts swapped, the nibble order, one scale byte,
 * one row) fails that layer's sweep naming the layer, the expert(s) and the projection(s) whose own probe
 * fails, while that layer's prompt-based conformance stays green.
 *
 * <p>Every expert comes through an expert cache of {@value #CACHE_BYTES} bytes (the memory plan's path: 896
 * experts of 17.6 MB do not stay resident). Data: the scale fixture ({@code -Dk3.scale}, generated from its seed
 * when absent), its float64 dump with the expert sweep ({@code reference-dumps/scale-k3}, docs/formats.md §7.10), and
 * corrupted copies written by {@link Corruptions} under {@code build/} (only the touched shard is copied,
 * sparsely; the rest hard-linked), each judged on its corrupted layer only; cases on disjoint experts share a copy
 * ({@link Copy}).
 */
@Tag("scale")
@Epic("experts")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ScaleExpertsGate {
    /** 28 slots of the real expert: a token's 16 routed experts fit, and a layer's 896 evict throughout. */
    static final long CACHE_BYTES = 500_000_000L;

    /** One corruption of unrouted experts with data in one layer; the experts and projections the sweep must name. */
    record Case(String name, List<Corruption> corruptions, int layer, List<Integer> experts, List<String> projections) {
        @Override
        public String toString() {
            return name;
        }
    }

    /**
     * Layer 1 (KDA + MoE): experts 13, 68, 379 are idle (router bias at most 0: never routable), 300 is a pool
     * member the 5-token prompt does not route; all four hold data and lie in shard 2, with the layer's trunk.
     * Byte 18 of expert 300's w2 scales is 117 (a loud group, 2^-10): XOR 1 halves that group of 32 elements.
     */
    static final List<Case> TABLE = List.of(
            new Case("L1 experts 13 and 68 (idle) swapped", ExpertSweeps.expertSwap(1, 13, 68), 1, List.of(13, 68), List.of("w1", "w2", "w3")),
            new Case("L1 expert 379 (idle) nibble order flipped", List.of(new Corruption.NibbleFlip(1, 379)), 1, List.of(379), List.of("w1", "w2", "w3")),
            new Case("L1 expert 300 (unrouted) one w2 scale byte (group halved)", List.of(new Corruption.ExpertByte(1, 300, "w2_scale", 18, 1)), 1, List.of(300), List.of("w2")),
            new Case("L1 expert 13 (idle) one w1 row", List.of(new Corruption.ExpertRow(1, 13, "w1", 1000)), 1, List.of(13), List.of("w1")));

    static Path fixture, scratch;
    static ReferenceDump dump;
    static ScaleFixture fx;
    static Workers workers;
    static ExpertSweeps.Cached untouched;

    @BeforeAll
    static void open() throws IOException {
        fixture = ScaleFixture.underTest().dir();
        fx = ScaleFixture.of(fixture);
        dump = ReferenceDump.open(Project.dump("scale-k3"));
        scratch = Files.createTempDirectory(Files.createDirectories(Project.root().resolve("build")), "experts-scale-");
        workers = Workers.of(2);
    }

    @AfterAll
    static void close() throws IOException {
        if (untouched != null) untouched.close();
        if (workers != null) workers.close();
        Project.deleteTree(scratch);
    }

    /** The experts of {@code layer} that hold data: the pool and the idle ones. */
    static TreeSet<Integer> withData(int layer) {
        TreeSet<Integer> s = new TreeSet<>();
        for (int e : fx.pool(layer)) s.add(e);
        for (int e : fx.idle(layer)) s.add(e);
        return s;
    }

    record LayerCase(int layer, String kind) {
        @Override
        public String toString() {
            return "L" + layer + " " + kind + " experts (untouched scale fixture)";
        }
    }

    static Stream<LayerCase> moeLayers() {
        return IntStream.range(0, dump.layerCount()).filter(l -> dump.layer(l).mlp().equals("moe")).mapToObj(l -> new LayerCase(l, dump.layer(l).kind()));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("moeLayers")
    @Order(1)
    void everyExpertOfTheUntouchedFixtureConforms(LayerCase lc) {
        Evidence.caseName(lc.toString());
        Allure.feature("scale fixture");
        if (untouched == null) untouched = ExpertSweeps.throughCache(fixture, dump, workers, CACHE_BYTES);
        Conformance c = untouched.conformance();
        ExpertLayerReport r = c.experts(lc.layer());
        ExpertSweeps.evidence(r, c.expertSweep(), null);
        Evidence.parameter("wall s", String.format(Locale.ROOT, "%.1f", r.seconds()));
        k3j.cache.CacheStats st = untouched.cache().totalStats();
        Evidence.parameter("cache", st.requests() + " requests, " + st.misses() + " misses, " + st.evictions() + " evictions so far");
        if (!r.conforms()) fail(r.message());
        assertEquals(c.model().config().expertCount(), r.total(), "every expert of the layer is in the sweep");
        assertEquals(r.total(), r.checked(), r.coverage());
        TreeSet<Integer> ran = new TreeSet<>();
        for (ExpertReport e : r.experts()) if (!e.allZero()) ran.add(e.expert());
        assertEquals(withData(lc.layer()), ran, "exactly the experts the fixture's manifest lists with data ran through the kernels; the rest are its holes");
    }

    /**
     * The table's cases on as few copies as their experts allow: cases whose experts are disjoint share one copy
     * (each expert is judged on its own probes, so one copy's sweep judges every case it holds), a case that
     * touches an expert an earlier case of the copy touches starts another. A layer's sweep costs the same for one
     * corrupted expert as for four.
     */
    record Copy(List<Case> cases) {
        int layer() {
            return cases.getFirst().layer();
        }

        List<Corruption> corruptions() {
            return cases.stream().flatMap(c -> c.corruptions().stream()).toList();
        }

        /** Expert -> the projections its case names. */
        java.util.SortedMap<Integer, List<String>> expected() {
            java.util.SortedMap<Integer, List<String>> m = new java.util.TreeMap<>();
            for (Case c : cases) for (int e : c.experts()) m.put(e, c.projections());
            return m;
        }

        @Override
        public String toString() {
            return String.join(" + ", cases.stream().map(Case::name).toList());
        }
    }

    static List<Copy> copies() {
        List<List<Case>> groups = new java.util.ArrayList<>();
        for (Case c : TABLE) {
            List<Case> fit = groups.stream().filter(g -> g.getFirst().layer() == c.layer()
                    && g.stream().noneMatch(o -> o.experts().stream().anyMatch(c.experts()::contains))).findFirst().orElse(null);
            if (fit == null) groups.add(fit = new java.util.ArrayList<>());
            fit.add(c);
        }
        return groups.stream().map(g -> new Copy(List.copyOf(g))).toList();
    }

    static Stream<Copy> table() {
        if (TABLE.isEmpty()) fail("the corruption table is empty");
        List<Copy> copies = copies();
        assertEquals(TABLE, copies.stream().flatMap(c -> c.cases().stream()).toList(), "every case of the table is on exactly one copy");
        return copies.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("table")
    @Order(2)
    void theSweepNamesAnUnroutedCorruptedExpertWhilePromptConformanceStaysGreen(Copy k) throws IOException {
        Allure.feature("corrupted copies");
        for (Case c : k.cases()) {
            for (int e : c.experts()) {
                assertFalse(ExpertSweeps.routed(dump, c.layer()).contains(e), "the table's premise: L" + c.layer() + " expert " + e + " is never routed by the dump's prompt");
                assertTrue(withData(c.layer()).contains(e), "the table's premise: L" + c.layer() + " expert " + e + " holds data (a hole would read as zeros)");
            }
        }
        Path model = scratch.resolve("copy-" + TABLE.indexOf(k.cases().getFirst()));
        long t0 = System.nanoTime();
        Corruptions.write(fixture, model, k.corruptions());
        double copy = (System.nanoTime() - t0) / 1e9;
        Evidence.parameter("corruption", String.join(" + ", k.corruptions().stream().map(Corruption::spec).toList()));
        try (ExpertSweeps.Cached cached = ExpertSweeps.throughCache(model, dump, workers, CACHE_BYTES)) {
            Conformance c = cached.conformance();
            LayerReport prompt = c.layer(k.layer());
            ExpertLayerReport r = c.experts(k.layer());
            ExpertSweeps.evidence(r, c.expertSweep(), null);
            Evidence.parameter("prompt-based conformance", prompt.conforms() ? "L" + k.layer() + " conforms (worst stage " + Evidence.format(prompt.worstRatioToBudget()) + "x budget)" : prompt.message());
            Evidence.parameter("wall s", String.format(Locale.ROOT, "copy %.1f, layer %.1f, sweep %.1f", copy, prompt.seconds(), r.seconds()));

            assertTrue(prompt.conforms(), "the prompt routes none of the corrupted experts: L" + k.layer() + "'s prompt-based conformance must stay green: " + prompt.message());
            assertEquals(r.total(), r.checked(), r.coverage());
            assertFalse(r.conforms(), "the sweep of L" + k.layer() + " must fail");
            assertEquals(List.copyOf(k.expected().keySet()), r.failing().stream().map(ExpertReport::expert).sorted().toList(),
                    "the sweep names exactly the corrupted experts: " + r.message());
            for (ExpertReport e : r.failing()) {
                assertEquals(k.expected().get(e.expert()), e.failingProjections(), "L" + k.layer() + " expert " + e.expert() + ": the failing projections name the corruption: " + e.message());
                assertTrue(e.message().startsWith(e.finding().tag() + " L" + k.layer() + " expert " + e.expert() + ": "), "the message names the layer and the expert: " + e.message());
            }
        } finally {
            Project.deleteTree(model);
        }
    }

    // ------------------------------------------------------------------ near the budget

    static final long SEED = 13;
    static final int PLANTED = 160;

    /**
     * At the released widths one packed byte is one or two FP4 elements of a 3072 x 3584 matrix: the part's error is
     * about the budget itself, so these corruptions measure the sketch right at its line. Each of {@value #PLANTED}
     * random small corruptions (a packed byte XOR a random mask, a scale byte's lowest bit, one row shifted) of an
     * expert with data is judged by the sketch and by its true error; from 3 budgets up none may be missed, below it
     * the misses stay within the chi-square bound.
     */
    @org.junit.jupiter.api.Test
    @Order(3)
    void nearTheBudgetTheSketchMissesNoMoreThanTheChiSquareBoundAllows() {
        Allure.feature("detection at the released widths");
        if (untouched == null) untouched = ExpertSweeps.throughCache(fixture, dump, workers, CACHE_BYTES);
        Conformance c = untouched.conformance();
        ExpertSweep sweep = c.expertSweep();
        DetectionTally tally = new DetectionTally(sweep.sketchSize());
        int lt = c.model().config().latentSize(), inter = c.model().config().moeIntermediate();
        List<Integer> moe = c.moeLayers(IntStream.range(0, c.layerCount()).boxed().toList());
        java.util.Map<Integer, ExpertSweep.Probes> probes = new java.util.HashMap<>();
        java.util.Map<Long, Forward.ExpertProbe> clean = new java.util.HashMap<>();
        java.util.Random rnd = new java.util.Random(SEED);
        long t0 = System.nanoTime(), firstUse = 0;
        try (PatchedExperts patched = new PatchedExperts(c.model(), CACHE_BYTES)) {
            Forward corrupt = c.model().forward(workers, patched);
            for (int i = 0; i < PLANTED; i++) {
                int layer = moe.get(rnd.nextInt(moe.size()));
                Integer[] data = withData(layer).toArray(Integer[]::new);
                int e = data[rnd.nextInt(data.length)];
                ExpertSweep.Probes pr = probes.computeIfAbsent(layer, sweep::probes);
                patched.plant(null);
                Forward.ExpertProbe a = clean.get((long) layer << 32 | e);
                if (a == null) {   // first use of this expert: read from the checkpoint, repacked, probed (timed: the sweep's cost per expert)
                    long t1 = System.nanoTime();
                    a = DetectionTally.probe(corrupt, sweep, pr, e);
                    firstUse += System.nanoTime() - t1;
                    clean.put((long) layer << 32 | e, a);
                }
                PatchedExperts.Patch p = PatchedExperts.random(rnd, layer, e, lt, inter);
                patched.plant(p);
                Forward.ExpertProbe b = DetectionTally.probe(corrupt, sweep, pr, e);
                tally.add(p.kind(), p.spec(), DetectionTally.trueRatio(sweep, pr, a, b, e), !sweep.judge(pr, e, b, false).conforms());
            }
        } catch (IOException | k3j.cache.ExpertLoadException ex) {
            throw new AssertionError(ex.getMessage(), ex);
        }
        Evidence.parameter("corruptions", tally.total() + " (seed " + SEED + "; experts with data of layers " + moe + ")");
        Evidence.parameter("s per expert read, repacked and probed", String.format(Locale.ROOT, "%.3f (mean over %d first uses)", firstUse / 1e9 / clean.size(), clean.size()));
        tally.evidence("random one-byte and one-row corruptions at the released widths", (System.nanoTime() - t0) / 1e9);
        tally.check(PLANTED / 4);
    }
}
