package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import k3j.conform.Charts;
import k3j.conform.Conformance;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.conform.LayerSelection;
import k3j.conform.LogitParity;
import k3j.conform.ReferenceDump;
import k3j.harness.ChildJvm;
import k3j.harness.Caught;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.kernels.Workers;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: the harness judges ANY engine, not only k3j, from the activations it dumps. On the 93-layer oracle:
 * the torch reference run in float32 as a candidate conforms at every layer, stage and logit; each named
 * mutant of the reference (a plausible wrong port), written as a candidate, fails, and its first divergence is
 * the first layer and stage where the mutant acts (the MLA LoRA-norm eps read from the config, 1e-5 instead of
 * 1e-6: the first MLA layer, attention output); k3j's own candidate ({@code k3 MODEL --dump-activations})
 * judges exactly like the direct run; {@code k3 compare-logits} passes a good logit file and fails a bad one.
 *
 * <p>Data: {@code -Dk3.candidates=DIR}, written by
 * {@code reference-dumps/torch/dump_candidate.py reference-dumps/mini-k3-93 --out DIR --all-mutants} (.ci/run
 * does it): DIR/float32, one folder per mutant of the dump's mutant table. A missing folder FAILS.
 */
@Tag("ports")
@Epic("ports")
class PortsGate {
    static final String EPS_MUTANT = "mla_lora_config_eps";

    @Test
    void theTorchFloat32CandidateConformsEverywhere() {
        Allure.feature("torch float32");
        try (Conformance c = candidate("float32")) {
            List<LayerReport> reports = layers(c);
            List<String> bad = reports.stream().filter(r -> !r.conforms()).map(LayerReport::line).toList();
            assertTrue(bad.isEmpty(), "layers that do not conform:\n" + String.join("\n", bad));
            for (boolean incremental : new boolean[] {false, true}) {
                LogitParity.Result p = c.teacherForcing(incremental);
                Evidence.text("logits, " + p.mode(), p.text());
                assertEquals(Finding.CONFORMS, p.finding(), p.mode() + ":\n" + p.text());
            }
            LogitParity.Greedy g = c.greedy();
            Evidence.text("greedy ids", g.text());
            assertTrue(g.equal(), g.text());
        }
    }

    static Stream<String> mutants() {
        List<String> names = new ArrayList<>();
        reference().field("mutants").forEach(m -> names.add(m.path("name").asText()));
        if (names.isEmpty()) fail("gate data missing: the mini-k3-93 dump lists no mutant");
        return names.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("mutants")
    void eachMutantFailsWhereItFirstActs(String mutant) {
        Evidence.caseName("mutant " + mutant);
        Allure.feature("torch mutants");
        try (Conformance c = candidate(mutant)) {
            JsonNode m = c.candidateDump().manifest().path("mutant");
            assertEquals(mutant, m.path("name").asText(), "the candidate's manifest names its mutant");
            Evidence.parameter("wrong", m.path("wrong").asText());
            JsonNode acts = m.path("acts_at");
            if (acts.isMissingNode() || acts.isNull()) fail("the candidate records no acts_at: the mutant changes nothing on this checkpoint");
            Divergence d = firstDivergence(c);
            (d.finding() == Finding.CONFORMS ? Caught.missed("torch mutant", mutant + ": " + m.path("wrong").asText())
                    : new Caught("torch mutant", mutant + ": " + m.path("wrong").asText(), d.layer(), d.stage(), d.finding().tag(), d.ratio())).attach();
            Evidence.parameter("acts at", (acts.path("layer").isNull() ? "model level" : "L" + acts.path("layer").asInt()) + " " + acts.path("stage").asText("(binding)"));
            Evidence.parameter("first divergence", d.toString());
            if (acts.path("layer").isNull()) {
                assertEquals("logits", acts.path("stage").asText());
                assertEquals(null, d.layer(), "a model-level mutant leaves every layer conforming: " + d);
                assertNotEquals(Finding.CONFORMS, d.finding(), "the logits must fail");
                return;
            }
            assertEquals(acts.path("layer").asInt(), d.layer(), "first failing layer: " + d);
            if (acts.path("stage").isNull()) {
                assertEquals(Finding.MISSING_STAGE, d.finding(), "a layer the port cannot bind has no stage: " + d);
            } else {
                assertEquals(acts.path("stage").asText(), d.stage(), "first failing stage: " + d);
            }
        }
    }

    @Test
    void theLoraNormEpsFromTheConfigFailsAtTheFirstMlaLayerOnTheAttentionOutput() {
        Allure.feature("torch mutants");
        try (Conformance c = candidate(EPS_MUTANT)) {
            int firstMla = reference().field("layer_map").asText().indexOf('M');
            Divergence d = firstDivergence(c);
            Evidence.parameter("first MLA layer", firstMla);
            Evidence.parameter("first divergence", d.toString());
            assertEquals(firstMla, d.layer(), d.toString());
            assertEquals("attn_out", d.stage(), d.toString());
            assertEquals(Finding.BINDING_ERROR, d.finding(), "1e-5 for 1e-6 misses by thousands of budgets: " + d);
        }
    }

    @Test
    void k3jsCandidateJudgesExactlyLikeTheDirectRun(@TempDir Path tmp) throws Exception {
        Allure.feature("k3j candidate");
        Path model = Project.fixture("mini-k3-93"), out = tmp.resolve("k3j");
        String prompt = ints(reference().promptIds());
        ChildJvm.Result run = ChildJvm.k3(model.toString(), "--ids", prompt, "--gen", "1", "--threads", "1", "--dump-activations", out.toString());
        Evidence.text("k3 --dump-activations", run.output());
        assertEquals(0, run.exit(), run.output());
        try (Workers w = Workers.of(1);
             Conformance direct = Conformance.open(model, ReferenceDump.open(Project.dump("mini-k3-93")), w);
             Conformance cand = Conformance.candidate(out, null, List.of(Project.root().resolve("reference-dumps")))) {
            int differ = 0;
            for (int i = 0; i < direct.layerCount(); i++) {
                LayerReport a = direct.layer(i), b = cand.layer(i);
                if (a.finding() != b.finding() || !a.ratios().equals(b.ratios()) || !a.message().equals(b.message())
                        || (a.routing() == null ? b.routing() != null : !a.routing().equals(b.routing()))) {
                    differ++;
                    Evidence.text("L" + i + " differs", a.line() + "\n" + b.line());
                }
            }
            assertEquals(0, differ, "layers whose candidate verdict or ratios differ from the direct run");
            for (boolean incremental : new boolean[] {false, true}) {
                assertEquals(direct.teacherForcing(incremental), cand.teacherForcing(incremental), incremental ? "incremental logits" : "full-recompute logits");
            }
            assertTrue(Arrays.equals(direct.greedy().engine(), cand.greedy().engine()), "greedy ids");
            Evidence.parameter("layers equal", direct.layerCount() + "/" + direct.layerCount());
        }
    }

    @Test
    void compareLogitsPassesAGoodFileAndFailsABadOne(@TempDir Path tmp) throws Exception {
        Allure.feature("compare-logits");
        ReferenceDump ref = reference();
        String dump = Project.dump("mini-k3-93").toString();
        // good: k3j's own --dump-logits (the C engine's raw format) and the torch float32 candidate's [T, V] logits
        Path raw = tmp.resolve("k3j.logits");
        ChildJvm.Result run = ChildJvm.k3(Project.fixture("mini-k3-93").toString(), "--ids", ints(ref.promptIds()), "--gen", "1", "--threads", "1",
                "--dump-logits", raw.toString());
        assertEquals(0, run.exit(), run.output());
        expect(0, "VERDICT: CONFORMS", "k3 compare-logits (k3j --dump-logits)", raw.toString(), "--reference", dump);
        expect(0, "VERDICT: CONFORMS", "k3 compare-logits (torch float32 .npy)", candidates().resolve("logits-float32.npy").toString(), "--reference", dump, "--position", "11");
        // bad: the eps mutant's last-prompt row (.npy) and the same row as raw bytes
        expect(1, "VERDICT: DOES NOT CONFORM", "k3 compare-logits (eps mutant .npy)", candidates().resolve("logits-" + EPS_MUTANT + ".npy").toString(), "--reference", dump);
        Path badRaw = tmp.resolve("eps.logits");
        int v = ref.shape("logits")[1], np = ref.promptIds().length;
        float[] row = Arrays.copyOfRange(k3j.conform.CandidateDump.open(candidates().resolve(EPS_MUTANT)).logits(false), (np - 1) * v, np * v);
        ByteBuffer b = ByteBuffer.allocate(4 * v).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(row);
        Files.write(badRaw, b.array());
        expect(1, "first differing rank", "k3 compare-logits (eps mutant raw)", badRaw.toString(), "--reference", dump);
        // refused: one float short, and a NaN
        Files.write(tmp.resolve("short.logits"), Arrays.copyOf(b.array(), 4 * v - 4));
        expect(2, "refused", "k3 compare-logits (short file)", tmp.resolve("short.logits").toString(), "--reference", dump);
        b.putFloat(0, Float.NaN);
        Files.write(tmp.resolve("nan.logits"), b.array());
        expect(2, "non-finite", "k3 compare-logits (NaN)", tmp.resolve("nan.logits").toString(), "--reference", dump);
    }

    // ---------------------------------------------------------------------------------------------

    /** Where a candidate first departs: the first failing layer and its first failing stage, else the logits. */
    record Divergence(Integer layer, String kind, String stage, Finding finding, String message, double ratio) {
        @Override
        public String toString() {
            return (layer == null ? "model level" : "L" + layer + " " + kind) + " " + stage + " " + finding.tag() + (message.isEmpty() ? "" : ": " + message);
        }
    }

    static Divergence firstDivergence(Conformance c) {
        List<LayerReport> reports = layers(c);
        for (LayerReport r : reports) {
            if (!r.conforms()) {
                String first = r.firstDivergence();
                double ratio = r.stages().stream().filter(m -> m.stage().equals(first)).mapToDouble(k3j.conform.StageMetric::ratioToBudget).findFirst().orElse(r.worstRatioToBudget());
                return new Divergence(r.layer(), r.kind(), first, r.finding(), r.message(), ratio);
            }
        }
        LogitParity.Result p = c.teacherForcing(false);
        return new Divergence(null, "", "logits", p.finding(), String.format(Locale.ROOT, "%.3gx budget", p.ratioToBudget()), p.ratioToBudget());
    }

    /** Every layer judged, with the run's lines and the layers x stages chart as evidence. */
    static List<LayerReport> layers(Conformance c) {
        List<LayerReport> reports = new ArrayList<>();
        StringBuilder lines = new StringBuilder();
        for (int i = 0; i < c.layerCount(); i++) {
            LayerReport r = c.layer(i);
            reports.add(r);
            lines.append(r.line()).append('\n');
        }
        List<Integer> bad = reports.stream().filter(r -> !r.conforms()).map(LayerReport::layer).toList();
        Evidence.parameter("candidate", c.engine());
        Evidence.parameter("conforming layers", (reports.size() - bad.size()) + "/" + reports.size() + (bad.isEmpty() ? "" : "; failing " + LayerSelection.format(bad)));
        Evidence.text("layers", lines.toString());
        Allure.addAttachment("layers x stages (ratio to budget)", "image/svg+xml", Charts.overview(reports, c.engine()), ".svg");
        return reports;
    }

    static void expect(int exit, String fragment, String what, String... args) throws Exception {
        ChildJvm.Result r = ChildJvm.k3(Stream.concat(Stream.of("compare-logits"), Arrays.stream(args)).toArray(String[]::new));
        Evidence.text(what, r.output());
        assertEquals(exit, r.exit(), what + ":\n" + r.output());
        assertTrue(r.output().contains(fragment), what + " should say '" + fragment + "':\n" + r.output());
    }

    static Conformance candidate(String name) {
        Path dir = candidates().resolve(name);
        Project.existing(dir);
        return Conformance.candidate(dir, Project.dump("mini-k3-93"), List.of());
    }

    static Path candidates() {
        String p = Project.property("k3.candidates");
        if (p.isEmpty()) fail("gate data missing: -Dk3.candidates is not set (the torch candidates: reference-dumps/torch/dump_candidate.py ... --all-mutants)");
        Path path = Path.of(p);
        return Project.existing(path.isAbsolute() ? path : Project.root().resolve(path).normalize());
    }

    static ReferenceDump reference() {
        return ReferenceDump.open(Project.dump("mini-k3-93"));
    }

    static String ints(int[] v) {
        return String.join(",", Arrays.stream(v).mapToObj(String::valueOf).toList());
    }
}
