package k3j.api;

import java.util.ArrayList;
import java.util.List;
import k3j.conform.Invariants;
import k3j.conform.Verdict;
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

    /** Every layer, every swept expert, every logit comparison and greedy generation conform: the decision is CONFORMS. */
    public boolean conforms() {
        return decision().green();
    }

    /**
     * The one decision ({@link Invariants#decide}) on everything this report judged: each layer, each swept MoE layer,
     * each logits array and greedy generation; a candidate's missing stage or logits is not judged (INCOMPLETE), a
     * non-finite value refused.
     */
    public Verdict decision() {
        List<Invariants.Item> items = new ArrayList<>();
        for (LayerReport r : layers) items.add(Invariants.layer(r));
        for (ExpertLayerReport e : experts) items.add(item(e));
        for (Logits l : logits) items.add(item(l));
        if (greedy != null) items.add(item(greedy));
        return Invariants.decide(Invariants.Mode.FLOAT32, items);
    }

    /** A swept MoE layer's item of the decision. */
    public static Invariants.Item item(ExpertLayerReport e) {
        return e.conforms() ? Invariants.Item.pass("experts of L" + e.layer()) : Invariants.Item.fail("experts of L" + e.layer(), e.line());
    }

    /** A logits comparison's item: not judged when the stage is missing, refused when non-finite. */
    public static Invariants.Item item(Logits l) {
        return l.result() == null ? Invariants.Item.notJudged("logits", l.missing()) : Invariants.float32Logits("logits (" + l.result().mode() + ")", l.result(), false);
    }

    /** Greedy generation's item. */
    public static Invariants.Item item(Greedy g) {
        return g.result() == null ? Invariants.Item.notJudged("greedy ids", g.missing())
                : g.conforms() ? Invariants.Item.pass("greedy ids") : Invariants.Item.fail("greedy ids", "first divergence at generated step " + g.result().firstDivergence());
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
