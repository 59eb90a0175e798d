package k3j.gates;

import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;
import k3j.bisect.Bisect;
import k3j.conform.Conformance;
import k3j.conform.ExpertLayerReport;
import k3j.conform.ExpertReport;
import k3j.conform.ExpertSweep;
import k3j.harness.CheckpointUnderTest;
import k3j.harness.Evidence;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: EVERY routed expert of every selected MoE layer — not only the ones the dump's prompt routes —
 * reproduces the torch reference on the dump's seeded probes, judged by the expert sweep's sketches
 * (reference-dumps/FORMAT.md §10) through the engine's own expert path (the expert source of the checkpoint
 * under test: resident, or the expert cache under a memory plan). One case per MoE layer lists its worst
 * experts and "experts checked: N of M"; a failing expert is named with the projection (w1 / w2 / w3) whose own
 * probe fails, and {@code k3 bisect}'s diagnosis of it.
 *
 * <p>Metric per expert: max over probes and parts of ||S x_engine − S x_ref|| / ||x_ref|| ÷ budget, budget =
 * eps32 · sqrt(fan-in) · factor from the manifest. A dump without a complete sweep FAILS (reference mismatch).
 */
@Tag("checkpoint")
@Epic("checkpoint conformance")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ExpertConformanceGate {
    static final int WORST = 5;
    static final Map<Integer, ExpertLayerReport> reports = new TreeMap<>();

    record LayerCase(int layer, String kind) {
        @Override
        public String toString() {
            return "L" + layer + " " + kind + " experts";
        }
    }

    /** One case per selected MoE layer; none for a candidate dump (it holds no expert outputs: the overview fails, [missing stage]). */
    static Stream<LayerCase> moeLayers() {
        Conformance c = CheckpointUnderTest.open();
        if (c.candidateDump() != null) return Stream.of();
        return c.moeLayers(CheckpointUnderTest.selected()).stream().map(l -> new LayerCase(l, c.dump().layer(l).kind()));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("moeLayers")
    @Order(1)
    void everyExpertOfTheLayerMatchesItsSketch(LayerCase lc) {
        Evidence.caseName(lc.toString());
        Allure.feature("experts");
        Allure.story("L" + lc.layer());
        Conformance c = CheckpointUnderTest.open();
        ExpertSweep sweep = c.expertSweep();
        ExpertLayerReport r = c.experts(lc.layer());
        synchronized (reports) {
            reports.put(lc.layer(), r);
        }
        Evidence.parameter("coverage", r.coverage());
        Evidence.parameter("verdict", r.conforms() ? "conforms" : r.finding().tag());
        Evidence.parameter("worst expert", r.experts().isEmpty() ? "none" : describeWorst(r.worst(1).getFirst()));
        Evidence.parameter("failing experts", r.failing().isEmpty() ? "none" : String.join(", ", r.failing().stream().map(e -> e.expert() + " (" + String.join(", ", e.failingProjections()) + ")").toList()));
        Evidence.parameter("layer", lc.layer());
        String diagnosis = null;
        if (!r.conforms() && !r.failing().isEmpty() && c.model() != null) {
            diagnosis = Bisect.expertDiagnosisLine(c, r.failing().getFirst(), CheckpointUnderTest.workers());
            if (diagnosis != null) Evidence.parameter("bisect", diagnosis);
        }
        Allure.description(description(r, sweep, diagnosis));
        Evidence.json("experts", json(r));
        Evidence.text("sweep", r.line());
        if (!r.conforms()) fail(r.message() + (diagnosis == null ? "" : "; bisect: " + diagnosis));
    }

    @Test
    @Order(2)
    void overviewOfEveryExpert() {
        Evidence.caseName("experts overview: layers " + k3j.conform.LayerSelection.format(CheckpointUnderTest.selected()));
        Allure.feature("overview");
        Conformance c = CheckpointUnderTest.open();
        if (c.candidateDump() != null) fail(k3j.conform.Finding.MISSING_STAGE.tag() + " " + c.engine() + ": a candidate dump holds no expert outputs; the expert sweep judges k3j's forward on the model");
        List<ExpertLayerReport> all = new ArrayList<>();
        for (int l : c.moeLayers(CheckpointUnderTest.selected())) {
            ExpertLayerReport r;
            synchronized (reports) {
                r = reports.get(l);
            }
            all.add(r != null ? r : c.experts(l));
        }
        int checked = all.stream().mapToInt(ExpertLayerReport::checked).sum(), total = all.stream().mapToInt(ExpertLayerReport::total).sum();
        List<ExpertLayerReport> bad = all.stream().filter(r -> !r.conforms()).toList();
        double worst = all.stream().filter(ExpertLayerReport::conforms).mapToDouble(ExpertLayerReport::worstRatioToBudget).max().orElse(0);
        Evidence.parameter("coverage", "experts checked: " + checked + " of " + total);
        Evidence.parameter("conforming MoE layers", (all.size() - bad.size()) + "/" + all.size());
        Evidence.parameter("worst passing", Evidence.format(worst) + "x budget");
        Evidence.parameter("sketch", c.expertSweep().describe());
        Evidence.text("expert sweep", String.join("\n", all.stream().map(ExpertLayerReport::line).toList()));
        if (checked != total) fail("experts checked: " + checked + " of " + total);
        if (!bad.isEmpty()) fail(bad.getFirst().finding().tag() + " the experts of " + bad.size() + " of " + all.size() + " MoE layers do not conform: "
                + String.join("; ", bad.stream().map(ExpertLayerReport::message).toList()));
    }

    static String describeWorst(ExpertReport e) {
        return String.format(Locale.ROOT, "expert %d, %sx budget", e.expert(), Evidence.format(e.worst()));
    }

    /** The verdict, the coverage line and the worst experts as a markdown table. */
    static String description(ExpertLayerReport r, ExpertSweep sweep, String diagnosis) {
        StringBuilder sb = new StringBuilder();
        sb.append("**").append(r.conforms() ? "Every expert conforms" : r.message()).append("**\n\n");
        sb.append("**").append(r.coverage()).append("** (every routed expert of the layer on ").append(sweep.probes())
                .append(" seeded probes, not only the ones the prompt routes)\n\n");
        if (diagnosis != null) sb.append("bisect: ").append(diagnosis).append("\n\n");
        sb.append("ratio = ||S x_engine - S x_ref|| / ||x_ref|| per probe and part, as a multiple of the part's budget; ").append(sweep.describe()).append(".\n\n");
        sb.append("| expert | verdict | failing projections |");
        for (String p : ExpertSweep.PARTS) sb.append(' ').append(p).append(" |");
        sb.append("\n|---:|---|---|");
        for (int i = 0; i < ExpertSweep.PARTS.size(); i++) sb.append("---:|");
        sb.append('\n');
        for (ExpertReport e : r.worst(Math.max(WORST, r.failing().size()))) {
            sb.append("| ").append(e.expert()).append(" | ").append(e.conforms() ? "conforms" : e.finding().tag()).append(" | ")
                    .append(e.failingProjections().isEmpty() ? "-" : String.join(", ", e.failingProjections())).append(" |");
            for (double v : e.ratios()) sb.append(' ').append(Evidence.format(v)).append(" |");
            sb.append('\n');
        }
        return sb.toString();
    }

    static Map<String, Object> json(ExpertLayerReport r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("layer", r.layer());
        m.put("kind", r.kind());
        m.put("checked", r.checked());
        m.put("total", r.total());
        m.put("finding", r.finding().name());
        m.put("message", r.message());
        m.put("seconds", r.seconds());
        m.put("experts", r.experts().stream().map(e -> Map.of("expert", e.expert(), "finding", e.finding().name(), "ratios_to_budget", e.partRatios(),
                "failing_projections", e.failingProjections())).toList());
        return m;
    }
}
