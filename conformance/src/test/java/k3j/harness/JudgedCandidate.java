package k3j.harness;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LogitParity;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * What the one verdict path says of a candidate dump against one reference (docs/semantics.md §10.10): green or
 * not, the first failing layer and its first failing stage, that layer's category, the teacher-forced logits'
 * finding, and every layer's own outcome ("L3 conforms", "L1 attn_out WRONG_WEIGHTS", …). Two references judge a
 * candidate alike when these are equal.
 */
public record JudgedCandidate(boolean green, Integer firstLayer, String firstStage, String category, String logits, List<String> layers) {

    /** Judges {@code candidate} against {@code reference}; the worst ratios to budget are stated (evidence and stdout), not judged. */
    public static JudgedCandidate of(Path candidate, Path reference) {
        try (Conformance c = Conformance.candidate(candidate, reference, List.of())) {
            List<LayerReport> reports = TorchPorts.layers(c);
            LayerReport first = reports.stream().filter(r -> !r.conforms()).findFirst().orElse(null);
            boolean hasLogits = c.candidateDump().logits(false) != null;
            LogitParity.Result tf = hasLogits ? c.teacherForcing(false) : null;
            Finding logits = hasLogits ? tf.finding() : Finding.MISSING_STAGE;
            double worst = reports.stream().mapToDouble(LayerReport::worstRatioToBudget).filter(Double::isFinite).max().orElse(Double.NaN);
            double logit = hasLogits ? tf.ratioToBudget() : Double.NaN;
            Evidence.parameter("worst ratio to budget against " + c.dump().producer(), String.format(Locale.ROOT, "layers %.4g, logits %.4g", worst, logit));
            System.out.printf(Locale.ROOT, "judged ratio %s | %s | layers %.4g | logits %.4g%n", candidate.getFileName(), c.dump().producer(), worst, logit);
            List<String> each = reports.stream().map(r -> "L" + r.layer() + (r.conforms() ? " conforms" : " " + r.firstDivergence() + " " + r.finding().tag())).toList();
            // green as the one verdict path decides it (docs/semantics.md §10.11): every layer and the logits
            List<Invariants.Item> items = new java.util.ArrayList<>(reports.stream().map(LayerReport::item).toList());
            items.add(LogitParity.logitsItem(tf, "the candidate holds no logits"));
            boolean green = Invariants.decide(Invariants.Mode.FLOAT32, items).green();
            return new JudgedCandidate(green, first == null ? null : first.layer(), first == null ? null : first.firstDivergence(),
                    first == null ? null : first.finding().tag(), logits.tag(), each);
        }
    }

    /** The verdict, first divergence, category and logit finding alone (without every layer's outcome). */
    public JudgedCandidate headline() {
        return new JudgedCandidate(green, firstLayer, firstStage, category, logits, List.of());
    }
}
