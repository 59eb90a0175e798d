package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.BiConsumer;
import k3j.api.Conform;
import k3j.cli.K3;
import k3j.compare.Conformance;
import k3j.compare.LossyReport;
import k3j.dump.Budget;
import k3j.dump.ReferenceDump;
import k3j.dump.Stage;
import k3j.harness.CandidateFixture;
import k3j.harness.Caught;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.model.Assembly;
import k3j.verdict.ConformException;
import k3j.verdict.Verdict;
import k3j.verdict.VerdictLimits;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The invariants of the one verdict path (docs/semantics.md §10.11), one property each, over candidates generated from
 * the 93-layer oracle's reference dump: a perfect port made from the reference's own arrays, a lossy port (every array
 * with seeded relative noise), and each with one planted fault drawn at random. Every property holds for every draw,
 * through the API and through {@code k3 conform} / {@code k3 compare-logits} run in-process on the written files; a
 * failing draw names its property, seed and draw. Each property fails when the check behind it is removed (the list
 * of which removal fails which property is in docs/semantics.md §10.11).
 */
@Tag("verdict")
@Epic("verdicts")
class VerdictInvariantsGate {
    /** Draws of a property judged in memory, and of one that writes files and runs k3 per draw (about 5 s each on a loaded 2-core machine). */
    static final int DRAWS = 24, FILE_DRAWS = 8;

    static ReferenceDump ref;
    static String dump;
    static int tokens, vocab;

    @TempDir
    Path tmp;

    @BeforeAll
    static void reference() {
        Path d = Project.dump("mini-k3-93");
        ref = ReferenceDump.open(d);
        dump = d.toString();
        tokens = ref.ids().length;
        vocab = ref.shape("logits")[1];
    }

    /** Runs {@code body} for {@link #DRAWS} seeded draws; a failure names the property, the seed and the draw. */
    static void forAll(String property, long seed, int draws, BiConsumer<Integer, SplittableRandom> body) {
        SplittableRandom root = new SplittableRandom(seed);
        for (int draw = 0; draw < draws; draw++) {
            SplittableRandom r = root.split();
            try {
                body.accept(draw, r);
            } catch (AssertionError | RuntimeException e) {
                throw new AssertionError(property + ": draw " + draw + " of seed " + seed + " fails: " + e.getMessage(), e);
            }
        }
        Evidence.parameter("draws of " + property, draws + " (seed " + seed + ")");
    }

    /** k3 run in-process: exit code and everything printed. */
    record Run(int exit, String output) {}

    static Run k3(String... args) {
        StringWriter s = new StringWriter();
        PrintWriter w = new PrintWriter(s, true);
        int exit = K3.execute(w, w, Assembly.Intercepts.NONE, args);
        return new Run(exit, s.toString());
    }

    /** A lossy port: every float array of a perfect port times (1 + eps * N(0, 1)), eps drawn per port. */
    static CandidateFixture lossy(SplittableRandom r, double eps) {
        CandidateFixture c = CandidateFixture.perfect(ref);
        for (var a : c.arrays.values()) {
            if (a.f32() == null) continue;
            float[] v = a.f32();
            for (int j = 0; j < v.length; j++) v[j] = (float) (v[j] * (1 + eps * gaussian(r)));
        }
        return c;
    }

    static double gaussian(SplittableRandom r) {
        return Math.sqrt(-2 * Math.log(1 - r.nextDouble())) * Math.cos(2 * Math.PI * r.nextDouble());
    }

    static float maxAbs(float[] v) {
        float m = 0;
        for (float x : v) m = Math.max(m, Math.abs(x));
        return m;
    }

    static Verdict lossyLogits(float[] candidate, Double maxKl, Double minTop1) {
        return LossyReport.ofLogits(Map.of("full recompute", candidate), ref.f32("logits"), tokens, vocab, 0).verdict(maxKl, minTop1);
    }

    /** A random float stage key of the reference (one of the eight stages of a random layer). */
    static String randomStage(SplittableRandom r) {
        return "layers." + r.nextInt(ref.layerCount()) + "." + Stage.NAMES.get(r.nextInt(Stage.NAMES.size()));
    }

    // ---------------------------------------------------------------------------------------------

    @Test
    @Feature("invariant 1: plausible values")
    @DisplayName("1. a value that is non-finite or beyond the stated multiple of max|reference| is refused, never graded: in the logits and in any stage")
    void implausibleValuesAreRefused() throws IOException {
        VerdictLimits lim = VerdictLimits.shipped();
        forAll("invariant 1", 0x5A7L, DRAWS, (draw, r) -> {
            CandidateFixture c = lossy(r, 1e-3);
            String key = draw % 6 == 5 ? randomStage(r) : "logits";   // every sixth draw a stage: a candidate folder judged whole
            float[] v = c.f32(key);
            int rows = key.equals("logits") ? tokens : ref.shape(key)[0], width = v.length / rows;
            float big = switch (r.nextInt(6)) {
                case 0 -> Float.MAX_VALUE;
                case 1 -> 1e17f;
                case 2 -> Float.NaN;
                case 3 -> r.nextBoolean() ? Float.POSITIVE_INFINITY : Float.NEGATIVE_INFINITY;
                default -> (float) ((lim.magnitudeMultiple() * (1.01 + r.nextDouble())) * maxAbs(ref.f32(key)) * (r.nextBoolean() ? 1 : -1));
            };
            // the saturated forms: every row, half the rows, or one value
            int form = r.nextInt(3);
            for (int row = 0; row < rows; row++) {
                if (form == 0 || form == 1 && row % 2 == 0) Arrays.fill(v, row * width, (row + 1) * width, big);
            }
            if (form == 2) v[r.nextInt(v.length)] = big;
            Double maxKl = r.nextBoolean() ? null : 100.0, minTop1 = r.nextBoolean() ? null : 0.0;   // thresholds that would pass anything
            Verdict got;
            if (key.equals("logits")) {
                got = lossyLogits(v, maxKl, minTop1);
            } else {
                Path dir = write(c, "inv1-" + draw);
                try (Conformance k = Conformance.candidate(dir, Path.of(dump), List.of())) {
                    got = LossyReport.of(k, all(), true).verdict(maxKl, minTop1);
                }
            }
            assertEquals(Verdict.Outcome.REFUSED, got.outcome(), key + " holding " + big + " (form " + form + "): " + got.text());
        });
        // the same through compare-logits, float32 and --lossy, on a .npy
        CandidateFixture c = CandidateFixture.perfect(ref);
        Arrays.fill(c.f32("logits"), Float.MAX_VALUE);
        Path npy = Files.write(tmp.resolve("saturated.npy"), CandidateFixture.npy(c.arrays.get("logits")));
        for (String[] args : new String[][] {{"compare-logits", npy.toString(), "--reference", dump, "--lossy", "--max-kl", "1"},
                {"compare-logits", npy.toString(), "--reference", dump}}) {
            Run run = k3(args);
            Evidence.text(String.join(" ", args), run.output());
            assertEquals(2, run.exit(), run.output());
            assertTrue(run.output().contains("VERDICT: REFUSED"), run.output());
        }
    }

    @Test
    @Feature("invariant 2: the reference's arrays")
    @DisplayName("2. no verdict from other or fewer arrays than the reference defines: an extra array, a wrong shape, dtype or length, another reference are refused; a missing one is INCOMPLETE")
    void onlyTheReferencesArrays() {
        forAll("invariant 2", 0xA77L, 12, (draw, r) -> {   // each of the six faults in a folder and in an .npz
            CandidateFixture c = CandidateFixture.perfect(ref);
            String planted = plantArrayFault(c, r, draw % 6);
            Path file = draw % 2 == 0 ? write(c, "inv2-" + draw) : npz(c, "inv2-" + draw);
            ConformException e = assertThrows(ConformException.class, () -> Conformance.candidate(file, Path.of(dump), List.of()).close(), planted);
            assertTrue(e.getMessage().contains("refused") || e.getMessage().contains("do not fit") || e.getMessage().contains("was made from"), planted + ": " + e.getMessage());
        });
        // a stage left out: nothing is judged in its place
        CandidateFixture c = CandidateFixture.perfect(ref);
        c.arrays.remove("layers.7.attn_out");
        Path dir = write(c, "missing");
        try (Conform judge = Conform.candidate(dir, Conform.Options.DEFAULTS.withThreads(1).withReference(Path.of(dump), List.of()))) {
            k3j.api.Decision v = judge.report(judge.all(), false).decision();
            Evidence.text("missing layers.7.attn_out", v.text());
            assertEquals(k3j.api.Decision.Outcome.INCOMPLETE, v.outcome(), v.text());
        }
    }

    /** One array fault of docs/formats.md §9's candidate keys: what it planted. */
    static String plantArrayFault(CandidateFixture c, SplittableRandom r, int kind) {
        switch (kind) {
            case 0 -> {
                c.arrays.put("logits2", c.arrays.get("logits").copy());
                return "an extra logits2";
            }
            case 1 -> {
                int[] g = c.arrays.get("greedy_ids").i32();
                int n = Math.max(0, g.length + (r.nextBoolean() ? 1 : -1 - r.nextInt(Math.max(1, g.length - 1))));
                c.arrays.put("greedy_ids", new CandidateFixture.Array("I32", new long[] {n}, null, Arrays.copyOf(g, n)));
                return "greedy ids of length " + n;
            }
            case 2 -> {
                String key = r.nextBoolean() ? "logits" : randomStage(r);
                var a = c.arrays.get(key);
                long[] s = a.shape();
                long[] wrong = s.length == 2 ? new long[] {s[1], s[0]} : new long[] {s[0] * 2};
                if (Arrays.equals(wrong, s)) wrong = new long[] {s[0] * s[1]};
                c.arrays.put(key, new CandidateFixture.Array("F32", wrong, a.f32(), null));
                return key + " labelled " + Arrays.toString(wrong);
            }
            case 3 -> {
                String key = randomStage(r);
                var a = c.arrays.get(key);
                int[] ints = new int[a.f32().length];
                for (int j = 0; j < ints.length; j++) ints[j] = Float.floatToRawIntBits(a.f32()[j]);
                c.arrays.put(key, new CandidateFixture.Array("I32", a.shape(), null, ints));
                return key + " stored as '<i4'";
            }
            case 4 -> {
                StringBuilder hex = new StringBuilder();
                for (int i = 0; i < 64; i++) hex.append(Character.forDigit(r.nextInt(16), 16));
                ((ObjectNode) c.manifest.path("reference")).put("manifest_sha256", hex.toString());
                return "a manifest naming another reference " + hex;
            }
            default -> {
                String key = "layers." + ref.layerCount() + ".attn_out";
                c.arrays.put(key, c.arrays.get("layers.0.attn_out").copy());
                return "an array of a layer the reference does not have";
            }
        }
    }

    @Test
    @Feature("invariant 3: one reading, the same checks")
    @DisplayName("3. compare-logits and conform --candidate read a candidate alike: both refuse indices out of range and every array fault; a layer kind other than the reference's is refused by compare-logits and that layer's binding error in conform")
    void everyEntryPointRunsTheSameCandidateChecks() {
        forAll("invariant 3", 0xC4EC4L, FILE_DRAWS, (draw, r) -> {
            CandidateFixture c = CandidateFixture.perfect(ref);
            String planted;
            var layers = c.manifest.withArray("layers");
            int kind = draw % 8;
            if (kind < 6) {
                int i = r.nextInt(ref.layerCount());
                ObjectNode l = (ObjectNode) layers.get(i);
                planted = switch (kind) {
                    case 0 -> {
                        l.put("mlp", l.path("mlp").asText().equals("dense") ? "moe" : "dense");
                        yield "layer " + i + " mlp " + l.path("mlp").asText();
                    }
                    case 1 -> {
                        l.put("mixer", l.path("mixer").asText().equals("kda") ? "mla" : "kda");
                        yield "layer " + i + " mixer " + l.path("mixer").asText();
                    }
                    case 2 -> {
                        layers.addObject().put("index", -1 - r.nextInt(1000)).put("mixer", "kda").put("mlp", "dense");
                        yield "a layer index below 0";
                    }
                    case 3 -> {
                        layers.addObject().put("index", 1L << (31 + r.nextInt(32))).put("mixer", "kda").put("mlp", "dense");
                        yield "a layer index past 2^31";
                    }
                    case 4 -> {
                        layers.addObject().put("index", ref.layerCount() + r.nextInt(5)).put("mixer", "kda").put("mlp", "dense");
                        yield "a layer index past the reference's last";
                    }
                    default -> {
                        l.put("mixer", "mla").put("mlp", "moe");
                        if (ref.layer(i).mixer().equals("MLA") && ref.layer(i).mlp().equals("moe")) l.put("mlp", "dense");
                        yield "layer " + i + " as " + l.path("mixer").asText() + "/" + l.path("mlp").asText();
                    }
                };
            } else {
                planted = plantArrayFault(c, r, r.nextInt(6));
            }
            Path file = draw % 2 == 0 ? write(c, "inv3-" + draw) : npz(c, "inv3-" + draw);
            Run compare = k3("compare-logits", file.toString(), "--reference", dump, r.nextBoolean() ? "--lossy" : "--position=" + (tokens - 1));
            assertEquals(2, compare.exit(), planted + ": compare-logits\n" + compare.output());
            assertTrue(compare.output().contains("refused"), planted + ": compare-logits\n" + compare.output());
            // conform --candidate opens it through Conformance.candidate, as the API does: refused, or that layer a binding error
            if (kind == 0 || kind == 1 || kind == 5) {
                int layer = Integer.parseInt(planted.replaceAll("^layer (\\d+).*", "$1"));
                try (Conformance k = Conformance.candidate(file, Path.of(dump), List.of())) {
                    var report = k.layer(layer);
                    assertEquals(k3j.verdict.Finding.BINDING_ERROR, report.finding(), planted + ": conform --candidate\n" + report.line());
                }
            } else {
                ConformException e = assertThrows(ConformException.class, () -> Conformance.candidate(file, Path.of(dump), List.of()).close(), planted);
                assertTrue(e.getMessage().contains("refused") || e.getMessage().contains("do not fit") || e.getMessage().contains("was made from"), planted + ": " + e.getMessage());
            }
        });
        // and the perfect port passes both (the checks refuse faults, not candidates)
        Path good = write(CandidateFixture.perfect(ref), "perfect");
        Run compare = k3("compare-logits", good.toString(), "--reference", dump);
        assertEquals(0, compare.exit(), compare.output());
        Run conform = k3("conform", "--candidate", good.toString(), "--reference", dump, "--threads", "1");
        Evidence.text("k3 conform --candidate (perfect port)", conform.output());
        assertEquals(0, conform.exit(), conform.output());
    }

    @Test
    @Feature("invariant 4: lossy binding signature and contradiction")
    @DisplayName("4. a lossy grade fails on one layer's stage taken from another layer, and on mean KL near 0 with top-1 far below 100 %; a faithful lossy port is WITHIN; compare-logits --lossy judges both logits arrays as conform --lossy does")
    void aLossyGradeFailsOnABindingSignatureOrAContradiction() {
        VerdictLimits lim = VerdictLimits.shipped();
        forAll("invariant 4", 0xB1DL, FILE_DRAWS, (draw, r) -> {
            double eps = 1e-4 * Math.pow(30, r.nextDouble());   // 1e-4 .. 3e-3
            CandidateFixture c = lossy(r, eps);
            boolean plant = draw % 2 == 1;
            String planted = "none";
            if (plant) {
                String stage = Stage.NAMES.get(1 + r.nextInt(Stage.NAMES.size() - 1));
                // two layers of one build (mixer, MLP, boundary) that has at least three layers: the grade's "its kind"
                int a, b;
                do {
                    a = r.nextInt(ref.layerCount());
                    b = r.nextInt(ref.layerCount());
                } while (b == a || !build(a).equals(build(b)) || buildSize(b) < 3);
                c.arrays.put("layers." + b + "." + stage, c.arrays.get("layers." + a + "." + stage).copy());
                planted = "L" + b + " " + stage + " from L" + a;
            }
            Path dir = write(c, "inv4-" + draw);
            try (Conformance k = Conformance.candidate(dir, Path.of(dump), List.of())) {
                Verdict v = LossyReport.of(k, all(), true).verdict(10.0, 0.0);   // thresholds that pass any logits: the layers decide
                if (plant) {
                    assertEquals(Verdict.Outcome.OUTSIDE, v.outcome(), planted + ": " + v.text());
                    String layer = planted.substring(0, planted.indexOf(' ')) + " ";
                    assertTrue(v.findings().stream().anyMatch(f -> f.startsWith(layer)), planted + " not named: " + v.text());
                } else {
                    assertEquals(Verdict.Outcome.WITHIN, v.outcome(), "a faithful port at eps " + eps + ": " + v.text());
                }
            }
        });
        forAll("invariant 4 (contradiction)", 0xC0DL, DRAWS, (draw, r) -> {
            // rows whose top two are within 1e-6 of each other, the candidate swapping them on most rows: KL ~1e-12, top-1 mostly wrong
            float[] want = ref.f32("logits").clone(), got;
            for (int t = 0; t < tokens; t++) {
                int top = argmax(want, t * vocab), second = (top + 1 + r.nextInt(vocab - 1)) % vocab;
                want[t * vocab + second] = Math.nextDown(want[t * vocab + top]);
            }
            got = want.clone();
            int swapped = 0;
            for (int t = 0; t < tokens; t++) {
                if (r.nextDouble() < 0.2 + 0.8 * r.nextDouble()) {
                    int top = argmax(want, t * vocab);
                    int second = -1;
                    for (int j = 0; j < vocab; j++) if (j != top && want[t * vocab + j] == Math.nextDown(want[t * vocab + top])) second = j;
                    float x = got[t * vocab + top];
                    got[t * vocab + top] = got[t * vocab + second];
                    got[t * vocab + second] = x;
                    swapped++;
                }
            }
            if (100.0 * (tokens - swapped) / tokens >= lim.contradictionTop1()) return;   // not a contradiction: nothing to check in this draw
            var l = LossyReport.ofLogits(Map.of("full recompute", got), want, tokens, vocab, 0);
            Verdict v = l.verdict(10.0, 0.0);
            assertEquals(Verdict.Outcome.OUTSIDE, v.outcome(), swapped + " rows swapped: " + v.text());
        });
        // the incremental rows swapped: compare-logits --lossy judges as conform --lossy does
        CandidateFixture c = CandidateFixture.perfect(ref);
        float[] inc = c.f32("logits_incremental");
        float[] row = Arrays.copyOfRange(inc, 0, vocab);
        System.arraycopy(inc, (tokens - 1) * vocab, inc, 0, vocab);
        System.arraycopy(row, 0, inc, (tokens - 1) * vocab, vocab);
        Path file = npz(c, "swapped");
        Run compare = k3("compare-logits", file.toString(), "--reference", dump, "--lossy", "--max-kl", "1e-3");
        Run conform = k3("conform", "--candidate", file.toString(), "--reference", dump, "--lossy", "--max-kl", "1e-3", "--threads", "1");
        Evidence.text("compare-logits --lossy (incremental rows swapped)", compare.output());
        Evidence.text("conform --lossy (incremental rows swapped)", conform.output());
        assertEquals(1, compare.exit(), compare.output());
        assertEquals(1, conform.exit(), conform.output());
        assertTrue(compare.output().contains("VERDICT: OUTSIDE") && conform.output().contains("VERDICT: OUTSIDE"), compare.output() + conform.output());
    }

    static String build(int i) {
        ReferenceDump.LayerInfo l = ref.layer(i);
        return l.mixer() + "/" + l.mlp() + "/" + l.boundary();
    }

    static long buildSize(int i) {
        return all().stream().filter(j -> build(j).equals(build(i))).count();
    }

    static int argmax(float[] v, int off) {
        int best = 0;
        for (int j = 1; j < vocab; j++) if (v[off + j] > v[off + best]) best = j;
        return best;
    }

    @Test
    @Feature("invariant 5: defaults")
    @DisplayName("5. --lossy without thresholds grades by the shipped defaults, and no garbage passes them: random, constant, negated or row-permuted logits")
    void theDefaultsPassNoGarbage() {
        float[] want = ref.f32("logits");
        float scale = maxAbs(want);
        forAll("invariant 5", 0xDEFL, DRAWS, (draw, r) -> {
            float[] got = new float[want.length];
            String kind;
            switch (draw % 4) {
                case 0 -> {
                    for (int j = 0; j < got.length; j++) got[j] = (float) (scale / 3 * gaussian(r));
                    kind = "random";
                }
                case 1 -> {
                    Arrays.fill(got, (float) ((r.nextDouble() * 2 - 1) * scale));
                    kind = "constant";
                }
                case 2 -> {
                    for (int j = 0; j < got.length; j++) got[j] = -want[j];
                    kind = "negated";
                }
                default -> {
                    int shift = 1 + r.nextInt(tokens - 1);
                    for (int t = 0; t < tokens; t++) System.arraycopy(want, t * vocab, got, ((t + shift) % tokens) * vocab, vocab);
                    kind = "rows shifted by " + shift;
                }
            }
            Verdict v = lossyLogits(got, null, null);
            assertTrue(!v.green(), kind + " logits passed the defaults: " + v.text());
        });
    }

    @Test
    @Feature("invariant 6: budget widths")
    @DisplayName("6. every budget is on the width of the reduction it bounds: the logits on the hidden width, so a logits vector scaled past that budget does not conform against a plain reference or a dump")
    void everyBudgetIsOnTheWidthOfItsReduction() throws IOException {
        var config = ref.field("config");
        int hidden = (config.has("text_config") ? config.path("text_config") : config).path("hidden_size").asInt();
        assertTrue(hidden > 0 && hidden != vocab, "the dump's config states a hidden width other than V");
        Budget b = ref.budget();
        for (String s : Stage.NAMES) assertEquals(hidden, b.width(s), "the width of " + s);
        assertEquals(hidden, b.width("logits"), "the logits are LM-head dot products over the hidden width");
        double budgetE = b.ofWidth(hidden), budgetV = b.ofWidth(vocab);
        Path model = Project.fixture("mini-k3-93");
        Path plain = Files.write(tmp.resolve("reference.npy"), CandidateFixture.npy(CandidateFixture.perfect(ref).arrays.get("logits")));
        forAll("invariant 6", 0xE1DL, FILE_DRAWS / 2, (draw, r) -> {
            boolean outside = draw % 3 != 0;
            // outside: a scale error between the hidden-width budget and the vocabulary-width one; inside: well under the budget
            double rel = outside ? budgetE * 1.05 + r.nextDouble() * (budgetV * 0.95 - budgetE * 1.05) : budgetE * 0.4 * r.nextDouble();
            CandidateFixture c = CandidateFixture.perfect(ref);
            float[] v = c.f32("logits");
            for (int j = 0; j < v.length; j++) v[j] = (float) (v[j] * (1 + rel));
            Path npy;
            try {
                npy = Files.write(tmp.resolve("scaled-" + draw + ".npy"), CandidateFixture.npy(c.arrays.get("logits")));
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            Run againstPlain = k3("compare-logits", npy.toString(), "--reference", plain.toString(), "--model", model.toString());
            Run againstDump = k3("compare-logits", npy.toString(), "--reference", dump);
            String why = String.format(Locale.ROOT, "scaled by 1 + %.3g (budget on E %.3g, on V %.3g)", rel, budgetE, budgetV);
            assertEquals(outside ? 1 : 0, againstPlain.exit(), why + ", plain reference:\n" + againstPlain.output());
            assertEquals(outside ? 1 : 0, againstDump.exit(), why + ", dump:\n" + againstDump.output());
        });
    }

    @Test
    @Feature("the catches page")
    @DisplayName("the new wrong ports are caught: a lossy port with saturated logits, a lossy port with one layer's attn_out bound from another layer, a NaN stage")
    void theNewWrongPortsAreCaught() {
        SplittableRandom r = new SplittableRandom(0xCA7L);
        int a, b;
        do {
            a = r.nextInt(ref.layerCount());
            b = r.nextInt(ref.layerCount());
        } while (b == a || !build(a).equals(build(b)) || buildSize(b) < 3);
        int nanLayer = r.nextInt(ref.layerCount());
        List<Object[]> ports = List.of(
                new Object[] {"a lossy port whose logits saturate at 3.4e38 (KL 0 by log-softmax cancellation)", null, "logits"},
                new Object[] {"a lossy port with L" + b + " attn_out bound from L" + a, b, "attn_out"},
                new Object[] {"a lossy port with a NaN in L" + nanLayer + " mlp_out", nanLayer, "mlp_out"});
        List<String> missed = new ArrayList<>();
        for (int k = 0; k < ports.size(); k++) {
            CandidateFixture c = lossy(r, 1e-3);
            switch (k) {
                case 0 -> {
                    Arrays.fill(c.f32("logits"), Float.MAX_VALUE);
                    Arrays.fill(c.f32("logits_incremental"), Float.MAX_VALUE);
                }
                case 1 -> c.arrays.put("layers." + b + ".attn_out", c.arrays.get("layers." + a + ".attn_out").copy());
                default -> c.f32("layers." + nanLayer + ".mlp_out")[r.nextInt(c.f32("layers." + nanLayer + ".mlp_out").length)] = Float.NaN;
            }
            Object[] port = ports.get(k);
            String planted = (String) port[0];
            Verdict v;
            try (Conformance judged = Conformance.candidate(write(c, "port-" + k), Path.of(dump), List.of())) {
                v = LossyReport.of(judged, all(), true).verdict(null, null);
            }
            Evidence.text(planted, v.text());
            boolean named = v.findings().stream().anyMatch(f -> f.contains((String) port[2]) && (port[1] == null || f.contains("L" + port[1] + " ")));
            if (v.green() || !named) {
                Caught.missed("wrong port", planted).attach();
                missed.add(planted + ": " + v.line());
            } else {
                new Caught("wrong port", planted, (Integer) port[1], (String) port[2], v.outcome().words(), null).attach();
            }
        }
        assertTrue(missed.isEmpty(), "not caught, or caught at another layer or stage: " + missed);
    }

    // ---------------------------------------------------------------------------------------------

    static List<Integer> all() {
        List<Integer> a = new ArrayList<>();
        for (int i = 0; i < ref.layerCount(); i++) a.add(i);
        return a;
    }

    Path write(CandidateFixture c, String name) {
        try {
            return c.writeFolder(tmp.resolve(name));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    Path npz(CandidateFixture c, String name) {
        try {
            return c.writeNpz(tmp.resolve(name + ".npz"));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }
}
