package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import k3j.cache.ExpertCache;
import k3j.cache.ReadMode;
import k3j.dump.ReferenceDump;
import k3j.harness.CaseVerdict;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.kernels.Argmax;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.LayerStages;
import k3j.model.Model;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: the forward reproduces the float64 torch reference on the tiny oracle (oracle-fixtures/tiny-k3,
 * reference-dumps/tiny-k3) — teacher forcing, greedy full recompute, incremental decode, state reuse, every
 * layer and stage from the dump's own inputs, and the same bits at 1 and 2 threads. Metric per case: the worst
 * |got − want| / atol with atol from the dump's manifest (ids and routing exact).
 */
@Tag("oracle")
@Epic("oracle")
class OracleGate {
    static final String[] STAGES = {"attn_in", "attn_norm", "attn_out", "partial_attn", "mlp_in", "mlp_norm", "mlp_out", "partial_out"};

    static Model model;
    static ReferenceDump dump;
    static Workers two;
    static int[] ids, prompt, generated;
    static int t, e, v;

    @BeforeAll
    static void open() {
        dump = ReferenceDump.open(Project.dump("tiny-k3"));
        model = Model.open(Project.fixture("tiny-k3"));
        two = Workers.of(2);
        ids = dump.ints("ids");
        prompt = dump.ints("prompt_ids");
        generated = dump.ints("generated_ids");
        if (ids.length == 0 || prompt.length == 0 || generated.length == 0) fail(dump + "/manifest.json: ids, prompt_ids or generated_ids is empty");
        assertArrayEquals(generated, dump.i32("greedy_ids"), "the dump's manifest and greedy_ids disagree");
        t = ids.length;
        e = model.config().hiddenSize();
        v = model.config().vocabSize();
        assertEquals(model.config().layerMap(), dump.manifest().path("layer_map").asText(), "the dump was made for another layer map [reference mismatch]");
        assertEquals(model.config().layerCount(), dump.layerCount(), "the dump has a different layer count [reference mismatch]");
    }

    @AfterAll
    static void close() {
        if (two != null) two.close();
        if (model != null) model.close();
    }

    static Forward forward(Workers w) {
        return model.forward(w);
    }

    @Test
    void teacherForcingMatchesEveryPositionAndTheGeneratedSpanExactly() {
        Forward.Result r = forward(two).full(ids, true, null);
        double atol = dump.atol("logits");
        double ratio = ratio(r.logits(), dump.f32("logits"), atol);
        double mix = ratio(r.finalMix(), dump.f32("final_mix"), dump.atol("final_mix"));
        double norm = ratio(r.finalNorm(), dump.f32("final_norm"), dump.atol("final_norm"));
        int np = prompt.length, matches = 0;
        List<String> wrong = new ArrayList<>();
        for (int p = np - 1; p <= t - 2; p++) {
            int a = Argmax.fast(r.logits(), p * v, v);
            if (a == ids[p + 1]) matches++;
            else wrong.add("position " + p + ": argmax " + a + ", reference " + ids[p + 1]);
        }
        Evidence.parameter("worst ratio to tolerance", Math.max(ratio, Math.max(mix, norm)));
        Evidence.parameter("generated span", matches + "/" + (t - np));
        Evidence.json("teacher forcing", Map.of("logits ratio", ratio, "final_mix ratio", mix, "final_norm ratio", norm, "logits atol", atol,
                "generated span matches", matches, "mismatches", wrong));
        CaseVerdict.assertConforms("teacher forcing", List.of(CaseVerdict.exact("the generated span's argmax", wrong.isEmpty(), "teacher-forced argmax differs: " + wrong),
                CaseVerdict.ratio("logits (atol " + atol + ")", ratio), CaseVerdict.ratio("final_mix", mix), CaseVerdict.ratio("final_norm", norm)));
    }

    @Test
    void greedyFullRecomputeGivesTheReferenceIds() {
        Generation g = Generation.greedy(forward(two), prompt, generated.length, false);
        Evidence.parameter("ids equal", same(g.generated()) + "/" + generated.length);
        Evidence.parameter("worst ratio to tolerance", same(g.generated()) == generated.length ? 0.0 : Double.POSITIVE_INFINITY);
        assertArrayEquals(generated, g.generated(), "full-recompute greedy ids");
    }

    @Test
    void incrementalDecodeGivesTheReferenceIdsAndFullRecomputesLogits() {
        Generation inc = Generation.greedy(forward(two), prompt, generated.length, true);
        Generation full = Generation.greedy(forward(two), prompt, generated.length, false);
        double atol = dump.atol("logits"), worst = 0.0;
        for (int g = 0; g < generated.length; g++) worst = Math.max(worst, ratio(inc.stepLogits().get(g), full.stepLogits().get(g), atol));
        Evidence.parameter("ids equal", same(inc.generated()) + "/" + generated.length);
        Evidence.parameter("worst ratio to tolerance", worst);
        assertArrayEquals(generated, inc.generated(), "incremental greedy ids");
        CaseVerdict.assertConforms("incremental decode", List.of(CaseVerdict.ratio("incremental step logits against full recompute's (atol " + atol + ")", worst)));
    }

    @Test
    void reusingOneClearedStateSlotGivesBitIdenticalLogits() {
        Forward f = forward(two);
        float[] fresh = f.full(ids, true, null).logits();
        float[] reused = f.fullReusingOneStateSlot(ids, true).logits();
        int differing = differingBits(fresh, reused);
        Evidence.parameter("differing logits", differing);
        Evidence.parameter("worst ratio to tolerance", differing == 0 ? 0.0 : Double.POSITIVE_INFINITY);
        assertEquals(0, differing, "logits with one reused state slot differ in " + differing + " positions");
    }

    @Test
    void oneAndTwoThreadsGiveTheSameBits() {
        float[] one = forward(Workers.serial()).full(ids, true, null).logits();
        float[] twoThreads = forward(two).full(ids, true, null).logits();
        int[] g1 = Generation.greedy(forward(Workers.serial()), prompt, 4, true).generated();
        int[] g2 = Generation.greedy(forward(two), prompt, 4, true).generated();
        int differing = differingBits(one, twoThreads);
        Evidence.parameter("differing logits", differing);
        Evidence.parameter("worst ratio to tolerance", differing == 0 ? 0.0 : Double.POSITIVE_INFINITY);
        assertEquals(0, differing, "1 vs 2 threads: " + differing + " logits differ");
        assertArrayEquals(g1, g2, "1 vs 2 threads: incremental ids differ");
    }

    @Test
    void expertsServedByTheCacheGiveTheSameBitsAsResidentExperts() throws Exception {
        float[] resident = forward(two).full(ids, true, null).logits();
        float[] cached;
        long evictions;
        // a budget of a few slots: the union prefetch evicts constantly, every expert is re-read from disk
        var settings = ExpertCache.Settings.of(12 * 16384, model.config().topK()).withReadMode(ReadMode.BUFFERED);
        try (ExpertCache cache = ExpertCache.open(model.experts(), settings, null, s -> {})) {
            cached = new Forward(model.weights(), cache, two, false).full(ids, true, null).logits();
            evictions = cache.totalStats().evictions();
        }
        int differing = differingBits(resident, cached);
        Evidence.parameter("differing logits", differing);
        Evidence.parameter("cache evictions", evictions);
        Evidence.parameter("worst ratio to tolerance", differing == 0 ? 0.0 : Double.POSITIVE_INFINITY);
        assertTrue(evictions > 0, "the cache never evicted: the case proves nothing");
        assertEquals(0, differing, "cache-served experts change " + differing + " logits");
    }

    static IntStream layers() {
        int n = dump == null ? ReferenceDump.open(Project.dump("tiny-k3")).layerCount() : dump.layerCount();
        if (n == 0) fail("the dump lists no layers");
        return IntStream.range(0, n);
    }

    @ParameterizedTest(name = "layer {0} from the dump's inputs")
    @MethodSource("layers")
    void everyStageOfOneLayerFromTheDumpsInputs(int layer) {
        int nSnap = dump.layer(layer).snapshotsAttn();
        List<float[]> snaps = dump.snapshots(nSnap, t, e);
        float[] partialIn = dump.f32("layers." + layer + ".partial_in");
        LayerStages st = forward(two).runLayer(layer, partialIn, snaps, t);
        Map<String, Double> ratios = compare(layer, st, "atol_layer");
        if (dump.layer(layer).boundary()) {
            assertEquals(nSnap + 1, st.snapshotsOut().size(), "layer " + layer + " is a boundary: one more snapshot");
            assertArrayEquals(partialIn, st.snapshotsOut().get(nSnap), "layer " + layer + ": the boundary snapshot is the INCOMING partial");
        }
        report(layer, ratios);
    }

    @Test
    void everyStageOfEveryLayerInTheWholeModelRun() {
        List<LayerStages> stages = new ArrayList<>();
        forward(two).full(ids, false, stages::add);
        assertEquals(dump.layerCount(), stages.size(), "layers run");
        Map<String, Double> worst = new LinkedHashMap<>();
        List<String> failures = new ArrayList<>();
        for (LayerStages s : stages) {
            try {
                for (var en : compare(s.layer(), s, "atol_e2e").entrySet()) worst.put("layer " + s.layer() + " " + en.getKey(), en.getValue());
            } catch (AssertionError | ConformException a) {
                failures.add(a.getMessage());
            }
        }
        double w = worst.values().stream().mapToDouble(Double::doubleValue).max().orElse(Double.POSITIVE_INFINITY);
        Evidence.parameter("worst ratio to tolerance", failures.isEmpty() ? w : Double.POSITIVE_INFINITY);
        Evidence.json("ratios", worst);
        assertTrue(failures.isEmpty(), String.join("\n", failures));
    }

    /** Compares every stage (and routing, and the final KDA state) of one layer; fails naming layer and stage. */
    static Map<String, Double> compare(int layer, LayerStages st, String kind) {
        Map<String, Double> ratios = new LinkedHashMap<>();
        float[][] got = {st.attnIn(), st.attnNorm(), st.attnOut(), st.partialAttn(), st.mlpIn(), st.mlpNorm(), st.mlpOut(), st.partialOut()};
        for (int i = 0; i < STAGES.length; i++) {
            ratios.put(STAGES[i], ratio(got[i], dump.f32("layers." + layer + "." + STAGES[i]), dump.atol(layer, STAGES[i], kind)));
        }
        List<Invariants.Item> items = new ArrayList<>();
        String p = "layers." + layer + ".";
        if (dump.has(p + "moe_idx")) {
            if (st.moeIdx() == null) items.add(Invariants.Item.fail("layer " + layer + " stage moe_idx", "the engine ran no MoE"));
            else {
                int[] want = dump.i32(p + "moe_idx");
                items.add(CaseVerdict.exact("layer " + layer + " stage moe_idx", Arrays.equals(want, st.moeIdx()),
                        Finding.BINDING_ERROR.tag() + " routing differs " + firstDiff(want, st.moeIdx())));
                ratios.put("moe_weight", ratio(st.moeWeight(), dump.f32(p + "moe_weight"), dump.atol(layer, "moe_weight", kind)));
            }
        }
        if (dump.has(p + "kda_state") && st.kdaState() != null && kind.equals("atol_layer")) {
            ratios.put("kda_state", ratio(st.kdaState().recurrent(), dump.f32(p + "kda_state"), dump.atol(layer, "kda_state", kind)));
            ratios.put("q_conv_state", ratio(st.kdaState().qConv(), dump.f32(p + "q_conv_state"), dump.atol(layer, "q_conv_state", kind)));
            ratios.put("k_conv_state", ratio(st.kdaState().kConv(), dump.f32(p + "k_conv_state"), dump.atol(layer, "k_conv_state", kind)));
            ratios.put("v_conv_state", ratio(st.kdaState().vConv(), dump.f32(p + "v_conv_state"), dump.atol(layer, "v_conv_state", kind)));
        }
        for (var en : ratios.entrySet()) items.add(CaseVerdict.ratio("layer " + layer + " stage " + en.getKey() + " (" + kind + ")", en.getValue()));
        CaseVerdict.assertConforms("layer " + layer, items);
        return ratios;
    }

    /** max |got − want| / atol (infinite on a length mismatch or a NaN). */
    static double ratio(float[] got, float[] want, double atol) {
        if (got.length != want.length) return Double.POSITIVE_INFINITY;
        double worst = 0.0;
        for (int i = 0; i < got.length; i++) {
            double r = Math.abs((double) got[i] - (double) want[i]) / atol;
            if (Double.isNaN(r)) return Double.POSITIVE_INFINITY;
            worst = Math.max(worst, r);
        }
        return worst;
    }

    static void report(int layer, Map<String, Double> ratios) {
        double w = ratios.values().stream().mapToDouble(Double::doubleValue).max().orElse(Double.POSITIVE_INFINITY);
        Evidence.parameter("layer", layer);
        Evidence.parameter("worst ratio to tolerance", w);
        Evidence.json("ratio per stage", ratios);
    }

    static String firstDiff(int[] a, int[] b) {
        for (int i = 0; i < Math.min(a.length, b.length); i++) if (a[i] != b[i]) return "at " + i + ": reference " + a[i] + ", engine " + b[i];
        return "lengths " + a.length + " vs " + b.length;
    }

    static int same(int[] got) {
        int n = 0;
        for (int i = 0; i < Math.min(got.length, generated.length); i++) if (got[i] == generated[i]) n++;
        return n;
    }

    static int differingBits(float[] a, float[] b) {
        if (a.length != b.length) return Math.max(a.length, b.length);
        int n = 0;
        for (int i = 0; i < a.length; i++) if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) n++;
        return n;
    }
}
