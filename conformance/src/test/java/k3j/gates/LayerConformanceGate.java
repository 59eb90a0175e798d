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
import k3j.compare.Causes;
import k3j.compare.Charts;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.compare.StageMetric;
import k3j.dump.Budget;
import k3j.harness.CheckpointItems;
import k3j.harness.CheckpointUnderTest;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ReportPart;
import k3j.harness.RunPlan;
import k3j.verdict.Finding;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: every layer of the checkpoint, run ALONE from the reference dump's own inputs (its incoming partial
 * sum and the snapshots it sees; fresh state), reproduces the torch reference at every stage — mixed
 * attention input and its norm, token-mixer output, partial after attention, mixed MLP input and its norm,
 * MLP/MoE output, returned partial sum, MoE combine weights — within the rounding budget (docs/semantics.md §10.7), and routes
 * every token to the same experts in the same order. One bad layer cannot poison the next.
 *
 * <p>Metric per stage: ratio = max|engine − ref| / max|ref| over the stage's [T][E] array, reported as a
 * ratio to budget = eps32 · sqrt(width) · factor (constants from the dump's manifest; seed: 1.2e-7, 50).
 * Verdict bands: ≤ 1 conforms, &lt; 100 "[rounding drift]", ≥ 100 or a routing difference "[binding error]".
 *
 * <p>Run: {@code mvn verify -Pcheckpoint -Dk3.model=DIR [-Dk3.reference=DUMP] [-Dk3.layers=40,41,50-60]}; the
 * same from {@code k3 conform}. No model, an unreadable one, or no matching dump FAILS. With
 * {@code -Pcandidate -Dk3.candidate=DUMP} the activations under test are another engine's candidate dump
 * (docs/formats.md §9) instead of k3j's forward: same cases, budgets and categories.
 */
@Tag("checkpoint")
@Epic("checkpoint conformance")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class LayerConformanceGate {
    static final Map<Integer, LayerReport> reports = new TreeMap<>();
    /** What bisect finds would explain each failing layer (computed once, on the layer's own page). */
    static final Map<Integer, String> diagnoses = new TreeMap<>();

    @Test
    @Order(0)
    void theReferenceDumpMatchesTheModel() {
        Evidence.caseName("the reference dump matches the model");
        Evidence.part(ReportPart.MODEL);
        Conformance c = CheckpointUnderTest.open();
        Evidence.parameter(c.candidateDump() != null ? "candidate" : "model", c.candidateDump() != null ? c.engine() : c.modelDir().toString());
        Evidence.parameter("reference", c.dump().source() + " — " + c.dump().producer());
        Evidence.parameter("layers", LayerSelection.format(CheckpointUnderTest.selected()));
        Evidence.text("budget rule", c.budget().rule() + "\nverdict bands: <= 1 budget conforms; < " + Finding.BINDING_RATIO
                + "x rounding drift; >= " + Finding.BINDING_RATIO + "x or a routing difference binding error");
        k3j.verdict.Invariants.Item match = CheckpointItems.modelMatch(c);
        RunPlan.judged(RunPlan.MODEL_MATCH, match);
        if (match.status() != k3j.verdict.Invariants.Status.PASS) fail(match.why());
    }

    /** One layer case: its display name is the report's case name, "L37 MLA" (and "L 5 KDA", see {@link Evidence#layer}). */
    record LayerCase(int layer, String kind) {
        @Override
        public String toString() {
            return Evidence.layer(layer) + " " + kind;
        }
    }

    // a -Dk3.shard=I/N part may hold the logit part alone and no layer (docs/formats.md §18.2): no layer case, the overview still runs
    @ParameterizedTest(name = "{0}", allowZeroInvocations = true)
    @MethodSource("layerCases")
    @Order(1)
    void layerConformsFromTheReferencesOwnInputs(LayerCase lc) {
        Evidence.caseName(lc.toString());
        Evidence.part(ReportPart.LAYERS);
        int layer = lc.layer();
        Conformance c = CheckpointUnderTest.open();
        LayerReport r = classified(c).get(layer);
        // the page opens with the evidence: the failure box holds the verdict, bisect's diagnosis and the stage table;
        // one label (the worst ratio, which the report's trend compares run to run) and no parameters
        Allure.label(WORST_LABEL, Evidence.format(r.worstRatioToBudget()));
        Allure.feature(Evidence.verdictGroup(r.conforms()));
        String diagnosis = r.conforms() ? null : diagnosis(c, r);
        Allure.description(description(r, c.budget(), diagnosis));
        Evidence.json("stage metrics", metrics(r, c, diagnosis));
        Evidence.text("verdict", r.line());
        if (diagnosis != null) Evidence.text("bisect", diagnosis);
        k3j.verdict.Invariants.Item judged = r.item();
        RunPlan.judged("L" + layer, judged);   // the run's verdict file judges the layer as this item: a missing stage is not judged, not a failure
        k3j.verdict.Verdict v = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, List.of(judged));
        if (!v.green()) fail(failure(r, diagnosis));
    }

    /**
     * Every selected layer's report with its cause ({@link Causes}: the cause of one layer's failure is read from all
     * selected layers together), judged once on the first layer case.
     */
    static Map<Integer, LayerReport> classified(Conformance c) {
        synchronized (reports) {
            if (reports.isEmpty()) {
                List<LayerReport> all = CheckpointItems.layers(c, CheckpointUnderTest.selected());
                k3j.harness.ShardFolders.layersJudged(all);   // -Dk3.shard: the shard's results hold the layers as run
                for (LayerReport r : all) reports.put(r.layer(), r);
            }
            return reports;
        }
    }

    /** The report's label holding a layer's worst ratio to budget (kept in the report's history for the trend). */
    static final String WORST_LABEL = "worst ratio to budget";

    /** The first stage over budget in the order computed ({@link LayerReport#firstDivergence}, else the first state stage over it). */
    static String firstOverBudget(LayerReport r) {
        String first = r.firstDivergence();
        if (first != null) return first;
        return r.stages().stream().filter(m -> !(m.ratioToBudget() <= 1)).map(StageMetric::stage).findFirst().orElse(null);
    }

    /**
     * A failing layer's message, read top down: the verdict with the first stage over budget and the worst, bisect's
     * diagnosis, then the whole stage table (state stages included) and the detail of the comparison.
     */
    static String failure(LayerReport r, String diagnosis) {
        StringBuilder sb = new StringBuilder(r.finding().tag()).append(' ').append(Evidence.layer(r.layer())).append(' ').append(r.kind()).append(" does not conform");
        String first = firstOverBudget(r);
        StageMetric w = r.worst();
        if (first != null) sb.append(": first over budget ").append(first).append(ratioOf(r, first));
        if (w != null && !w.stage().equals(first)) sb.append(", worst ").append(w.stage()).append(' ').append(Evidence.format(w.ratioToBudget())).append("x budget");
        if (r.routing() != null && !r.routing().equal()) sb.append(", routing differs on ").append(r.routing().tokensDiffering()).append('/').append(r.routing().tokens()).append(" tokens");
        if (diagnosis != null) sb.append("\nbisect: ").append(diagnosis);
        if (!r.stages().isEmpty()) sb.append("\n\n").append(stageTable(r));
        return sb.append("\n").append(r.message()).toString();
    }

    private static String ratioOf(LayerReport r, String stage) {
        return r.stages().stream().filter(m -> m.stage().equals(stage)).findFirst().map(m -> " " + Evidence.format(m.ratioToBudget()) + "x budget").orElse("");
    }

    /** Every compared stage, one a line, over-budget ones marked. */
    static String stageTable(LayerReport r) {
        int w = Math.max(5, r.stages().stream().mapToInt(m -> m.stage().length()).max().orElse(5));
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-" + w + "s  %12s  %10s  %10s%n", "stage", "ratio/budget", "max|diff|", "max|ref|"));
        for (StageMetric m : r.stages()) {
            sb.append(String.format(Locale.ROOT, "%-" + w + "s  %12s  %10.3g  %10.3g  %s%n", m.stage(), Evidence.format(m.ratioToBudget()), m.maxAbsDiff(), m.maxAbsRef(),
                    m.ratioToBudget() <= 1 ? "ok" : "OVER BUDGET"));
        }
        if (r.routing() != null) sb.append("routing: ").append(r.routing().equal() ? "equal (" + r.routing().tokens() + " tokens x top-" + r.routing().topK() + ")" : "differs, " + r.routing().first()).append('\n');
        return sb.toString();
    }

    /** bisect's diagnosis of a failing layer, or what it could not find; computed once per layer. */
    static String diagnosis(Conformance c, LayerReport r) {
        synchronized (diagnoses) {
            String d = diagnoses.get(r.layer());
            if (d == null) {
                d = Bisect.diagnosisLine(c, r, CheckpointUnderTest.workers());
                if (d == null) d = "no corruption bisect tries explains it (" + r.message() + ")";
                diagnoses.put(r.layer(), d);
            }
            return d;
        }
    }

    static Stream<LayerCase> layerCases() {
        Conformance c = CheckpointUnderTest.open();
        return CheckpointUnderTest.selected().stream().map(l -> new LayerCase(l, c.dump().layer(l).kind()));
    }

    @Test
    @Order(2)
    void overviewOfEveryStageOfEveryLayer() {
        String selection = "layers " + LayerSelection.format(CheckpointUnderTest.selected());
        // one overview per -Dk3.layers shard: the selection in the name keeps merged shards apart
        Evidence.caseName("overview: " + selection + " x stages");
        Evidence.part(ReportPart.LAYERS);
        Conformance c = CheckpointUnderTest.open();
        List<LayerReport> all = new ArrayList<>();
        for (int l : CheckpointUnderTest.selected()) all.add(classified(c).get(l)); // the overview alone (-Dtest=...#overview...) still sees every layer
        String title = "ratio to budget, " + selection + " of " + (c.candidateDump() != null ? c.candidateDump().source() : c.modelDir()).getFileName() + " (reference " + c.dump().source().getFileName() + ")";
        String svg = Charts.overview(all, title);
        Allure.addAttachment("layers x stages (ratio to budget)", "image/svg+xml", svg, ".svg");
        Allure.descriptionHtml("<p>Every stage of every selected layer, coloured by its ratio to the rounding budget (green inside, red = binding error). "
                + "Below: the worst stage per layer with the budget line.</p><img alt=\"layers x stages\" style=\"max-width:100%\" src=\"data:image/svg+xml;base64,"
                + java.util.Base64.getEncoder().encodeToString(svg.getBytes(java.nio.charset.StandardCharsets.UTF_8)) + "\"/>");
        List<LayerReport> bad = all.stream().filter(r -> !r.conforms()).toList();
        double worst = all.stream().filter(LayerReport::conforms).mapToDouble(LayerReport::worstRatioToBudget).max().orElse(0);
        Evidence.parameter("conforming", (all.size() - bad.size()) + "/" + all.size());
        Evidence.parameter("worst passing", Evidence.format(worst) + "x budget");
        for (Finding f : Finding.values()) {
            List<Integer> ls = all.stream().filter(r -> r.finding() == f).map(LayerReport::layer).toList();
            if (f != Finding.CONFORMS && !ls.isEmpty()) Evidence.parameter(f.tag(), LayerSelection.format(ls));
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("budget", c.budget().rule());
        summary.put("layers", all.stream().map(r -> Map.of("layer", r.layer(), "kind", r.kind(), "finding", r.finding().name(),
                "worst_ratio_to_budget", r.worstRatioToBudget(), "ratios_to_budget", r.ratios())).toList());
        Evidence.json("all layers", summary);
        StringBuilder lines = new StringBuilder();
        for (LayerReport r : all) lines.append(r.line()).append('\n');
        lines.append(String.format(Locale.ROOT, "%d passed, %d failed; worst stage across all passing layers: %.3gx of its rounding budget%n",
                all.size() - bad.size(), bad.size(), worst));
        Evidence.text("conform_all", lines.toString());
        if (!bad.isEmpty()) {
            // the summary names the first failing layer and stage, then what k3 bisect finds would explain it
            LayerReport first = bad.get(0);
            String firstFailing = diagnosis(c, first);
            Evidence.parameter("first failing", firstFailing);
            Evidence.text("bisect", firstFailing);
            fail(first.finding().tag() + " " + bad.size() + " of " + all.size() + " layers do not conform: "
                    + String.join(", ", bad.stream().map(r -> r.name() + " (" + r.finding().tag().replaceAll("[\\[\\]]", "") + ")").toList())
                    + "; first failing: " + firstFailing);
        }
    }

    /**
     * The case's description (what a reader sees first): the verdict, bisect's diagnosis of a failing layer, and
     * the stage table in markdown with every stage over its budget marked.
     */
    static String description(LayerReport r, Budget b, String diagnosis) {
        StringBuilder sb = new StringBuilder();
        sb.append("**").append(r.conforms() ? "Conforms" : r.finding().tag() + " does not conform").append("**");
        StageMetric w = r.worst();
        if (w != null) sb.append(": worst stage ").append(w.stage()).append(' ').append(Evidence.format(w.ratioToBudget())).append("x budget");
        sb.append("\n\n");
        if (diagnosis != null) sb.append("**bisect:** ").append(diagnosis).append("\n\n");
        sb.append("| stage | ratio / budget | | max abs diff | max abs ref |\n|---|---:|---|---:|---:|\n");
        for (StageMetric m : r.stages()) {
            boolean over = !(m.ratioToBudget() <= 1);
            String mark = over ? "**" : "";
            sb.append(String.format(Locale.ROOT, "| %s%s%s | %s%s%s | %s | %.3g | %.3g |%n", mark, m.stage(), mark, mark, Evidence.format(m.ratioToBudget()), mark,
                    over ? "**✗ OVER BUDGET**" : "ok", m.maxAbsDiff(), m.maxAbsRef()));
        }
        if (r.routing() != null) sb.append("\nRouting: ").append(r.routing().equal() ? "equal" : "differs, " + r.routing().first()).append('\n');
        sb.append("\nLayer run alone from the reference dump's own inputs. ratio = max|engine - ref| / max|ref|; budget = ")
                .append(Evidence.format(b.eps32())).append(" x sqrt(width) x ").append(Evidence.format(b.factor())).append(" (").append(b.source()).append(").\n");
        return sb.toString();
    }

    /** The layer's numbers for the report's first screen and trend (and anyone reading the results folder). */
    static Map<String, Object> metrics(LayerReport r, Conformance c, String diagnosis) {
        Budget b = c.budget();
        com.fasterxml.jackson.databind.JsonNode tol = c.dump().manifest().path("tolerances").path("layers").path(r.layer()).path("stages");
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("layer", r.layer());
        m.put("kind", r.kind());
        m.put("finding", r.finding().name());
        m.put("message", r.message());
        m.put("first_over_budget", firstOverBudget(r));
        m.put("worst_ratio_to_budget", r.worstRatioToBudget());
        m.put("diagnosis", diagnosis);
        m.put("seconds", r.seconds());
        m.put("budget_rule", b.rule());
        List<Map<String, Object>> stages = new ArrayList<>();
        for (StageMetric s : r.stages()) {
            Map<String, Object> e = new LinkedHashMap<>();
            e.put("stage", s.stage());
            e.put("ratio_to_budget", s.ratioToBudget());
            e.put("ratio", s.ratio());
            e.put("budget", s.budget());
            e.put("width", s.width());
            e.put("max_abs_diff", s.maxAbsDiff());
            e.put("max_abs_ref", s.maxAbsRef());
            e.put("mean_abs_diff", s.meanAbsDiff());
            // evidence only (the verdict is the budget): the dump's drift-derived atol for a layer run alone (docs/formats.md §7.4)
            double atol = tol.path(s.stage()).path("atol_layer").asDouble(Double.NaN);
            if (Double.isFinite(atol) && atol > 0) e.put("max_abs_diff_over_atol_layer", s.maxAbsDiff() / atol);
            stages.add(e);
        }
        m.put("stages", stages);
        if (r.routing() != null) m.put("routing", Map.of("equal", r.routing().equal(), "tokens", r.routing().tokens(), "top_k", r.routing().topK(),
                "tokens_differing", r.routing().tokensDiffering(), "first", r.routing().first()));
        return m;
    }
}
