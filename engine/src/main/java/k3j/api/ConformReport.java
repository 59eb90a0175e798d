package k3j.api;

import java.util.ArrayList;
import java.util.List;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.LayerReport;
import k3j.compare.LogitParity;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * What a conformance found: what was judged against which reference under which budget; every selected layer's
 * report (stage by stage against the rounding budget) and the seconds they took; the expert sweep (empty when
 * not asked); the elementwise logit comparisons, full recompute then incremental (empty with logits off); and
 * greedy generation against the reference's ids (null with logits off). {@link #decision()} is the one verdict on
 * all of it.
 */
public final class ConformReport {
    /**
     * One layer run alone from the reference dump's own inputs, compared stage by stage against the rounding budget.
     * Made by {@link Conform#layers}; its {@link #toString()} is one short line.
     */
    public static final class Layer {
        private final LayerReport report;

        Layer(LayerReport report) {
            this.report = report;
        }

        LayerReport report() {
            return report;
        }

        /** {@return the layer's index in the model} */
        public int layer() {
            return report.layer();
        }

        /** {@return the layer's kind: KDA (linear attention) or MLA (latent attention), as the config lays them out} */
        public String kind() {
            return report.kind();
        }

        /** {@return the layer's name, such as {@code L37 MLA}} */
        public String name() {
            return report.name();
        }

        /** {@return what the comparison amounts to} */
        public Finding finding() {
            return report.finding();
        }

        /** {@return whether the layer passes: it conforms, or differs in routing only at the reference's near-ties} */
        public boolean conforms() {
            return report.conforms();
        }

        /** {@return the first stage over its budget and by how much, or null when every stage is within it} */
        public String firstDivergence() {
            return report.firstDivergence();
        }

        /** {@return the largest ratio of a stage's difference to its budget (below 1 is within it; 0 when no stage ran)} */
        public double worstRatioToBudget() {
            return report.worstRatioToBudget();
        }

        /** {@return the finding's explanation (what differs where), or empty} */
        public String message() {
            return report.message();
        }

        /** {@return the seconds the layer's run and comparison took} */
        public double seconds() {
            return report.seconds();
        }

        /** {@return the line {@code k3 conform} prints for the layer: its name, pass or fail, its stages, the worst ratio and the seconds} */
        public String line() {
            return report.line();
        }

        /** One short line, such as {@code L37 MLA: conforms}, or the finding, where it first diverged and the worst stage. */
        @Override
        public String toString() {
            return report.toString();
        }
    }

    /** The expert sweep of one MoE layer: every routed expert run on the dump's probes. Made by {@link Conform#experts}. */
    public static final class Experts {
        private final ExpertLayerReport report;

        Experts(ExpertLayerReport report) {
            this.report = report;
        }

        ExpertLayerReport report() {
            return report;
        }

        /** {@return the layer's index in the model} */
        public int layer() {
            return report.layer();
        }

        /** {@return the layer's kind (KDA or MLA)} */
        public String kind() {
            return report.kind();
        }

        /** {@return the experts compared} */
        public int checked() {
            return report.checked();
        }

        /** {@return the layer's routed experts} */
        public int total() {
            return report.total();
        }

        /** {@return what the sweep amounts to} */
        public Finding finding() {
            return report.finding();
        }

        /** {@return whether every compared expert is within its budget} */
        public boolean conforms() {
            return report.conforms();
        }

        /** {@return the largest ratio to budget among the experts} */
        public double worstRatioToBudget() {
            return report.worstRatioToBudget();
        }

        /** {@return one message per failing expert, worst first} */
        public List<String> failing() {
            return report.failing().stream().map(ExpertReport::message).toList();
        }

        /** {@return the line {@code k3 conform --experts} prints for the layer} */
        public String line() {
            return report.line();
        }

        /** The layer's line. */
        @Override
        public String toString() {
            return report.line();
        }
    }

    /**
     * The elementwise comparison of one logits array with the reference's.
     *
     * @param mode          full recompute or incremental
     * @param rows          positions compared
     * @param vocab         the vocabulary (the length of a row)
     * @param maxAbsDiff    the largest absolute difference
     * @param relToMaxRef   the largest difference relative to the reference's largest magnitude
     * @param budget        the rounding budget of that relative difference
     * @param argmaxEqual   the positions whose argmax is the reference's
     * @param top10Overlap  the fewest of the reference's top 10 ids found in the engine's top 10, over the positions
     * @param finding       what the comparison amounts to
     * @param text          the comparison block as {@code k3 conform} prints it, a line per position
     */
    public record LogitComparison(String mode, int rows, int vocab, double maxAbsDiff, double relToMaxRef, double budget, int argmaxEqual, int top10Overlap,
                                  Finding finding, String text) {
        static LogitComparison of(LogitParity.Result r, Finding cause) {
            return new LogitComparison(r.mode(), r.rows(), r.vocab(), r.maxAbsDiff(), r.relToMaxRef(), r.budget(), r.argmaxEqual(), r.top10OverlapMin(),
                    cause != null ? cause : r.finding(), r.text());
        }

        /** {@return the relative difference over its budget: below 1 is within it} */
        public double ratioToBudget() {
            return relToMaxRef / budget;
        }

        /** One line: the mode, the finding and the ratio to budget. */
        @Override
        public String toString() {
            return "LogitComparison[" + mode + ", " + rows + " position(s): " + finding + ", " + String.format(java.util.Locale.ROOT, "%.3g", ratioToBudget()) + "x budget]";
        }
    }

    /** One logit comparison, or the stage that is missing for it (a candidate without logits). Made by {@link Conform#logits}. */
    public static final class Logits {
        private final LogitParity.Result result;
        private final String missing;
        private final Finding cause;

        Logits(LogitParity.Result result, String missing) {
            this(result, missing, null);
        }

        /** {@code cause}: the run's cause read from every layer ({@link k3j.compare.Causes#runCause}), which the comparison's finding then names. */
        Logits(LogitParity.Result result, String missing, Finding cause) {
            this.result = result;
            this.missing = missing;
            this.cause = cause;
        }

        LogitParity.Result result() {
            return result;
        }

        /** {@return the comparison, or null when the stage is missing} */
        public LogitComparison comparison() {
            return result == null ? null : LogitComparison.of(result, cause);
        }

        /** {@return why there is no comparison, or null when there is one} */
        public String missing() {
            return missing;
        }

        /** {@return whether there is a comparison and it conforms} */
        public boolean conforms() {
            return result != null && result.finding() == Finding.CONFORMS;
        }

        /** {@return the comparison block, or the missing stage's explanation} */
        public String text() {
            return result == null ? missing + "\n" : result.text();
        }

        /** One line: the comparison, or what is missing. */
        @Override
        public String toString() {
            return result == null ? "Logits[missing: " + missing + "]" : comparison().toString();
        }
    }

    /**
     * Greedy generation's ids against the reference's.
     *
     * @param engine          the engine's generated ids
     * @param reference       the reference's generated ids
     * @param firstDivergence the first generated step where they differ, or -1
     * @param nearTie         whether they part where the reference's own top two are within the rounding bound (either id is a correct result)
     * @param text            the block as {@code k3 conform} prints it
     */
    public record GreedyIds(int[] engine, int[] reference, int firstDivergence, boolean nearTie, String text) {
        /** Keeps copies of the id arrays. */
        public GreedyIds {
            engine = engine.clone();
            reference = reference.clone();
        }

        /** {@return the engine's ids (a copy)} */
        @Override
        public int[] engine() {
            return engine.clone();
        }

        /** {@return the reference's ids (a copy)} */
        @Override
        public int[] reference() {
            return reference.clone();
        }

        /** {@return whether every generated id equals the reference's} */
        public boolean equal() {
            return firstDivergence < 0;
        }

        /** One line: equal, or where they part. */
        @Override
        public String toString() {
            return "GreedyIds[" + engine.length + " id(s), " + (equal() ? "equal" : "first divergence at step " + firstDivergence + (nearTie ? " (near-tie)" : "")) + "]";
        }
    }

    /** Greedy generation against the reference's ids, or the stage that is missing for it. Made by {@link Conform#greedy}. */
    public static final class Greedy {
        private final LogitParity.Greedy result;
        private final String missing;

        Greedy(LogitParity.Greedy result, String missing) {
            this.result = result;
            this.missing = missing;
        }

        LogitParity.Greedy result() {
            return result;
        }

        /** {@return the ids compared, or null when the stage is missing} */
        public GreedyIds ids() {
            return result == null ? null : new GreedyIds(result.engine(), result.reference(), result.firstDivergence(), result.nearTie(), result.text());
        }

        /** {@return why there is no comparison, or null when there is one} */
        public String missing() {
            return missing;
        }

        /** {@return whether the ids are equal, or part only at a reference near-tie (both are correct results)} */
        public boolean conforms() {
            return result != null && (result.equal() || result.nearTie());
        }

        /** {@return the block as {@code k3 conform} prints it, or the missing stage's explanation} */
        public String text() {
            return result == null ? missing + "\n" : result.text();
        }

        /** One line: the ids compared, or what is missing. */
        @Override
        public String toString() {
            return result == null ? "Greedy[missing: " + missing + "]" : ids().toString();
        }
    }

    private final String subject, reference, budget;
    private final List<Layer> layers;
    private final double layerSeconds;
    private final List<Experts> experts;
    private final List<Logits> logits;
    private final Greedy greedy;
    private final boolean sweepPlanned;

    /**
     * A report of what was judged.
     *
     * @param subject      the model folder or candidate dump judged
     * @param reference    the reference dump it was judged against
     * @param budget       the rounding budget's rule
     * @param layers       the layers' reports
     * @param layerSeconds the seconds the layers took
     * @param experts      the expert sweep's reports (empty when not swept)
     * @param logits       the logit comparisons (empty with logits off)
     * @param greedy       greedy generation (null with logits off)
     */
    public ConformReport(String subject, String reference, String budget, List<Layer> layers, double layerSeconds, List<Experts> experts, List<Logits> logits,
                         Greedy greedy) {
        this(subject, reference, budget, layers, layerSeconds, experts, logits, greedy, false);
    }

    /**
     * A report of what was judged, saying whether the expert sweep was asked for: a sweep asked for that swept no MoE
     * layer (none among the selected layers) is not judged, so the decision is INCOMPLETE, never a vacuous pass.
     *
     * @param subject      the model folder or candidate dump judged
     * @param reference    the reference dump it was judged against
     * @param budget       the rounding budget's rule
     * @param layers       the layers' reports
     * @param layerSeconds the seconds the layers took
     * @param experts      the expert sweep's reports
     * @param logits       the logit comparisons (empty with logits off)
     * @param greedy       greedy generation (null with logits off)
     * @param sweepPlanned whether the expert sweep was asked for
     */
    public ConformReport(String subject, String reference, String budget, List<Layer> layers, double layerSeconds, List<Experts> experts, List<Logits> logits,
                         Greedy greedy, boolean sweepPlanned) {
        this.sweepPlanned = sweepPlanned;
        this.subject = subject;
        this.reference = reference;
        this.budget = budget;
        this.layers = List.copyOf(layers);
        this.layerSeconds = layerSeconds;
        this.experts = List.copyOf(experts);
        Finding cause = k3j.compare.Causes.runCause(this.layers.stream().map(Layer::report).toList());
        this.logits = logits.stream().map(l -> l.result == null || cause == null || l.result.finding().passes() || l.result.finding() == Finding.NON_FINITE
                ? l : new Logits(l.result, l.missing, cause)).toList();
        this.greedy = greedy;
    }

    /** {@return the model folder or candidate dump judged} */
    public String subject() {
        return subject;
    }

    /** {@return the reference dump it was judged against} */
    public String reference() {
        return reference;
    }

    /** {@return the rounding budget's rule} */
    public String budget() {
        return budget;
    }

    /** {@return every selected layer's report, in the order run} */
    public List<Layer> layers() {
        return layers;
    }

    /** {@return the seconds the layers took} */
    public double layerSeconds() {
        return layerSeconds;
    }

    /** {@return the expert sweep's reports: empty when not asked for} */
    public List<Experts> experts() {
        return experts;
    }

    /** {@return the logit comparisons, full recompute then incremental: empty with logits off} */
    public List<Logits> logits() {
        return logits;
    }

    /** {@return greedy generation against the reference's ids: null with logits off} */
    public Greedy greedy() {
        return greedy;
    }

    /** {@return the layers that do not conform} */
    public List<Layer> failing() {
        return layers.stream().filter(r -> !r.conforms()).toList();
    }

    /** {@return the worst stage's ratio to its budget among the passing layers (0 when none passed)} */
    public double worstPassing() {
        return layers.stream().filter(Layer::conforms).mapToDouble(Layer::worstRatioToBudget).max().orElse(0);
    }

    /**
     * The layers whose finding is {@code f}.
     *
     * @param f the finding
     * @return their indices, in the order run
     */
    public List<Integer> layersWith(Finding f) {
        return layers.stream().filter(r -> r.finding() == f).map(Layer::layer).toList();
    }

    /** {@return the first layer that does not conform, or null} */
    public Layer firstDivergence() {
        return layers.stream().filter(r -> !r.conforms()).findFirst().orElse(null);
    }

    /** {@return the MoE layers whose experts do not all conform} */
    public List<Experts> failingExperts() {
        return experts.stream().filter(r -> !r.conforms()).toList();
    }

    /** {@return whether every layer, every swept expert, every logit comparison and greedy generation conform: the decision is CONFORMS} */
    public boolean conforms() {
        return decision().green();
    }

    /**
     * The one decision on everything this report judged: each layer, each swept MoE layer, each logits array and
     * greedy generation; a candidate's missing stage or logits is not judged (INCOMPLETE), a non-finite value refused.
     *
     * @return the decision
     */
    public Decision decision() {
        return Decision.of(decided());
    }

    k3j.verdict.Verdict decided() {
        List<Invariants.Item> items = new ArrayList<>();
        for (Layer r : layers) items.add(r.report().item());
        for (Experts x : experts) items.add(x.report().item());
        if (sweepPlanned && experts.isEmpty()) items.add(Invariants.Item.notJudged("the expert sweep", "no MoE layer among the selected layers: no expert was swept"));
        Finding cause = k3j.compare.Causes.runCause(layers.stream().map(Layer::report).toList());
        for (Logits l : logits) items.add(k3j.compare.Causes.carry(LogitParity.logitsItem(l.result(), l.missing()), cause));
        if (greedy != null) items.add(LogitParity.greedyItem(greedy.result(), greedy.missing()));
        return Invariants.decide(Invariants.Mode.FLOAT32, items);
    }

    /** One line: what was judged against what, and the verdict (the layers, the experts, the logits, the greedy ids). */
    @Override
    public String toString() {
        Layer first = firstDivergence();
        return subject + " against " + reference + ": " + decision().outcome().words() + " (" + layers.size() + " layer(s), "
                + failing().size() + " failing" + (first != null ? ", first " + first : "") + "; " + failingExperts().size() + " MoE layer(s) with failing experts; "
                + logits.stream().filter(l -> !l.conforms()).count() + " of " + logits.size() + " logit comparison(s) failing" + (greedy == null ? "" : "; greedy ids " + (greedy.conforms() ? "equal" : "differ")) + ")";
    }

    /** {@return the decision's VERDICT line, as {@code k3 conform} prints it: {@code VERDICT: DOES NOT CONFORM [binding error]}} */
    public String verdict() {
        return decided().line();
    }
}
