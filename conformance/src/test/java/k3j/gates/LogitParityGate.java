package k3j.gates;

import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.compare.Charts;
import k3j.compare.Conformance;
import k3j.compare.LogitParity;
import k3j.harness.CheckpointItems;
import k3j.harness.CheckpointUnderTest;
import k3j.harness.Evidence;
import k3j.harness.ReportPart;
import k3j.harness.RunPlan;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: the whole model's logits match the reference dump's teacher-forcing logits at EVERY position, by the
 * full-recompute path and by the incremental one (prefill the prompt, then one token at a time through the KV
 * cache and the carried KDA state), and greedy generation gives the reference's ids.
 *
 * <p>Metric: max|diff| / max|ref| over all positions against budget = eps32 · sqrt(hidden) · factor (each logit a dot product over the hidden width; the dump's
 * manifest), plus the C engine's logit-comparison figures (docs/semantics.md §10.7) (max and mean |diff|, correlation, top-10 overlap, argmax per
 * position). The rows that produced the greedy ids must pick exactly the next id.
 */
@Tag("checkpoint")
@Epic("checkpoint conformance")
class LogitParityGate {
    static LogitParity.Result incremental;

    @Test
    @DisplayName("logits at every position, full recompute")
    void fullRecomputeLogitsMatchAtEveryPosition() {
        parity(false);
    }

    @Test
    @DisplayName("logits at every position, incremental (prefill the prompt, decode the rest one token at a time)")
    void incrementalLogitsMatchAtEveryPosition() {
        incremental = parity(true);
    }

    @Test
    @DisplayName("greedy generation (incremental) gives the reference ids")
    void greedyGenerationGivesTheReferenceIds() {
        Evidence.part(ReportPart.LOGITS);
        Conformance c = CheckpointUnderTest.open();
        LogitParity.Greedy g;
        try {
            g = c.greedy();
        } catch (ConformException e) {
            RunPlan.judged(RunPlan.GREEDY, CheckpointItems.unjudged(RunPlan.GREEDY, e));
            throw e;
        }
        Invariants.Item judged = LogitParity.greedyItem(g, null);
        RunPlan.judged(RunPlan.GREEDY, judged);
        Evidence.parameter("generated ids equal", g.equal() ? g.reference().length + "/" + g.reference().length : "first divergence at step " + g.firstDivergence());
        Evidence.text("greedy ids", g.text());
        if (judged.status() != Invariants.Status.PASS) {
            LogitParity.Result tf = incremental != null ? incremental : c.teacherForcing(true);
            Finding f = Finding.ofRatio(tf.ratioToBudget());
            String tag = (f == Finding.CONFORMS ? Finding.ROUNDING_DRIFT : f).tag();
            fail(tag + " greedy ids part at generated step " + g.firstDivergence() + ": engine top-5 " + g.engineTop5() + ", reference top-5 "
                    + g.referenceTop5() + " (teacher-forced logits " + Evidence.format(tf.ratioToBudget()) + "x budget)");
        }
    }

    private static LogitParity.Result parity(boolean incremental) {
        Evidence.part(ReportPart.LOGITS);
        Conformance c = CheckpointUnderTest.open();
        String item = incremental ? RunPlan.LOGITS_INCREMENTAL : RunPlan.LOGITS_FULL;
        long t0 = System.nanoTime();
        float[] engine;
        try {
            engine = c.engineLogits(incremental);
        } catch (ConformException e) {
            RunPlan.judged(item, CheckpointItems.unjudged(item, e));   // a candidate holding no logits: not judged, as k3 conform says
            throw e;
        }
        LogitParity.Result r = c.compareLogits(incremental ? "incremental" : "full recompute", engine);
        double secs = (System.nanoTime() - t0) / 1e9;
        Evidence.parameter("positions", r.rows() + " (prompt " + r.promptLength() + ")");
        Evidence.parameter("max |diff|", r.maxAbsDiff());
        Evidence.parameter("rel. diff", r.relToMaxRef());
        Evidence.parameter("verdict", r.finding() == Finding.CONFORMS ? "conforms" : r.finding().tag());
        Evidence.parameter("ratio to budget", r.ratioToBudget());
        Evidence.parameter("mean |diff|", r.meanAbsDiff());
        Evidence.parameter("correlation", String.format(java.util.Locale.ROOT, "%.9f", r.correlation()));
        Evidence.parameter("top-10 (min)", r.top10OverlapMin() + "/10");
        Evidence.parameter("argmax equal", r.argmaxEqual() + "/" + r.rows());
        Evidence.parameter("seconds", secs);
        Evidence.text("cmp_logits", r.text());
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("mode", r.mode());
        j.put("budget_rule", c.budget().rule());
        j.put("budget", r.budget());
        j.put("ratio_to_budget", r.ratioToBudget());
        j.put("max_abs_diff", r.maxAbsDiff());
        j.put("rel_to_max_ref", r.relToMaxRef());
        j.put("mean_abs_diff", r.meanAbsDiff());
        j.put("correlation", r.correlation());
        j.put("top10_overlap_min", r.top10OverlapMin());
        j.put("top10_overlap_mean", r.top10OverlapMean());
        j.put("argmax_equal", r.argmaxEqual());
        j.put("generated_span_argmax_wrong", r.spanArgmaxWrong());
        j.put("positions", r.positions());
        Evidence.json("logit metrics", j);
        String svg = Charts.parity(r, engine, c.dump().f32("logits"), 6000);
        Allure.addAttachment("engine vs reference logits", "image/svg+xml", svg, ".svg");
        Allure.descriptionHtml("<p><b>" + (r.finding() == Finding.CONFORMS ? "Conforms" : r.finding().tag()) + "</b>: max|diff| / max|ref| = "
                + Evidence.format(r.relToMaxRef()) + " = " + Evidence.format(r.ratioToBudget()) + "x the budget " + Evidence.format(r.budget())
                + " (eps32 x sqrt(hidden) x factor: each logit is a dot product over the hidden width); argmax equal at " + r.argmaxEqual() + "/" + r.rows() + " positions.</p>"
                + "<img alt=\"engine vs reference logits\" style=\"max-width:100%\" src=\"data:image/svg+xml;base64,"
                + java.util.Base64.getEncoder().encodeToString(svg.getBytes(java.nio.charset.StandardCharsets.UTF_8)) + "\"/>");
        Finding f = r.finding();
        Invariants.Item judged = LogitParity.item(item, r, false);
        RunPlan.judged(item, judged);
        k3j.verdict.Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, List.of(judged));
        Evidence.json("verdict", v.json());
        if (!v.green()) {
            fail(f.tag() + " logits (" + r.mode() + "): max|diff| / max|ref| = " + Evidence.format(r.relToMaxRef()) + " = " + Evidence.format(r.ratioToBudget())
                    + "x budget " + Evidence.format(r.budget()) + (r.spanArgmaxWrong().isEmpty() ? "" : "; " + String.join("; ", r.spanArgmaxWrong())));
        }
        return r;
    }
}
