package k3j.api;

import java.util.List;
import k3j.conform.ExpertLayerReport;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.conform.LogitParity;

/**
 * What a conformance found: what was judged against which reference under which budget; every selected layer's
 * report (stage by stage against the rounding budget) and the seconds they took; the expert sweep (empty when
 * not asked); the elementwise logit comparisons, full recompute then incremental (empty with logits off); and
 * greedy generation against the reference's ids (null with logits off).
 */
public record ConformReport(String subject, String reference, String budget, List<LayerReport> layers, double layerSeconds,
                            List<ExpertLayerReport> experts, List<Logits> logits, Greedy greedy) {
    public ConformReport {
        layers = List.copyOf(layers);
        experts = List.copyOf(experts);
        logits = List.copyOf(logits);
    }

    /** One logit comparison, or the stage that is missing for it (a candidate without logits). */
    public record Logits(LogitParity.Result result, String missing) {
        public boolean conforms() {
            return result != null && result.finding() == Finding.CONFORMS;
        }
    }

    /** Greedy generation against the reference's ids, or the stage that is missing for it. */
    public record Greedy(LogitParity.Greedy result, String missing) {
        public boolean conforms() {
            return result != null && (result.equal() || result.nearTie());   // ids parting at a reference near-tie are both correct results
        }
    }

    /** The layers that do not conform. */
    public List<LayerReport> failing() {
        return layers.stream().filter(r -> !r.conforms()).toList();
    }

    /** The worst stage's ratio to its budget among the passing layers (0 when none passed). */
    public double worstPassing() {
        return layers.stream().filter(LayerReport::conforms).mapToDouble(LayerReport::worstRatioToBudget).max().orElse(0);
    }

    /** The layers whose finding is {@code f}. */
    public List<Integer> layersWith(Finding f) {
        return layers.stream().filter(r -> r.finding() == f).map(LayerReport::layer).toList();
    }

    /** The first layer that does not conform, or null. */
    public LayerReport firstDivergence() {
        return layers.stream().filter(r -> !r.conforms()).findFirst().orElse(null);
    }

    /** The MoE layers whose experts do not all conform. */
    public List<ExpertLayerReport> failingExperts() {
        return experts.stream().filter(r -> !r.conforms()).toList();
    }

    /** Every layer, every swept expert, every logit comparison and greedy generation conform. */
    public boolean conforms() {
        return failing().isEmpty() && failingExperts().isEmpty() && logits.stream().allMatch(Logits::conforms) && (greedy == null || greedy.conforms());
    }

    /** One line: what was judged against what, and the verdict (the layers, the experts, the logits, the greedy ids). */
    @Override
    public String toString() {
        LayerReport first = firstDivergence();
        return subject + " against " + reference + ": " + (conforms() ? "conforms" : "does not conform") + " (" + layers.size() + " layer(s), "
                + failing().size() + " failing" + (first != null ? ", first " + first : "") + "; " + failingExperts().size() + " MoE layer(s) with failing experts; "
                + logits.stream().filter(l -> !l.conforms()).count() + " of " + logits.size() + " logit comparison(s) failing" + (greedy == null ? "" : "; greedy ids " + (greedy.conforms() ? "equal" : "differ")) + ")";
    }

    /** The layers' verdict line. */
    public String verdict() {
        int failed = failing().size();
        return failed == 0 ? "VERDICT: ALL LAYERS CONFORM" : "VERDICT: " + failed + " LAYER(S) DO NOT CONFORM";
    }
}
