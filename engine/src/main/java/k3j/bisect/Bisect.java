package k3j.bisect;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.conform.LayerReport;

/**
 * Names the first layer and stage that leave the reference, then diagnoses it: the failing layer is re-run
 * once per {@link Candidates candidate} that reaches the failing stage (it changes a tensor that stage
 * reads), and every candidate that brings that stage — and every stage before it — within budget is
 * reported. One layer per candidate, never the model.
 */
public final class Bisect {
    private Bisect() {}

    /** A candidate that makes the failing stage pass; {@code layerPasses}: and every stage of the layer, routing included. */
    public record Explanation(Candidate candidate, double stageRatio, boolean layerPasses, Stage stillFailing) {
        public String describe() {
            return candidate.describe() + (layerPasses ? "" : " (explains this stage; the layer still fails at " + stillFailing.key + ")");
        }
    }

    /** The diagnosis of one failing layer: its first failing stage, how far over budget, what explains it. */
    public record Diagnosis(int layer, String kind, Stage stage, double ratio, int tried, List<Explanation> explanations, long nanos) {
        public Diagnosis {
            explanations = List.copyOf(explanations);
        }

        public boolean explained() {
            return !explanations.isEmpty();
        }

        /** "L37 KDA attn_out 4.75e+04x budget: q_proj and k_proj are swapped", or "...: nothing explains it (...)". */
        public String summary() {
            String head = String.format(Locale.ROOT, "L%d %s %s %.3gx budget", layer, kind, stage.key, ratio);
            if (explanations.isEmpty()) {
                return head + ": nothing explains it (tried " + tried + " candidates: same-shape swaps, stored transposes, expert nibble flips, expert swaps)";
            }
            return head + ": " + String.join("; or ", explanations.stream().map(Explanation::describe).toList());
        }
    }

    /** Every checked layer and, when one fails, the diagnosis of the first. */
    public record Report(List<LayerReport> layers, Diagnosis diagnosis) {
        public Report {
            layers = List.copyOf(layers);
        }

        public List<Integer> failing() {
            return layers.stream().filter(l -> !l.conforms()).map(LayerReport::layer).toList();
        }

        /** The line a report's summary carries: the first failing layer, stage and diagnosis, and how many layers fail. */
        public String summary() {
            if (diagnosis == null) {
                return failing().isEmpty() ? "all " + layers.size() + " layers conform"
                        : "first failing layer " + layers.stream().filter(l -> !l.conforms()).findFirst().orElseThrow().message();
            }
            List<Integer> f = failing();
            return diagnosis.summary() + " [" + f.size() + " of " + layers.size() + " layers fail: " + f + "]";
        }
    }

    /** Checks {@code layers} in order and diagnoses the first failing one. */
    public static Report run(LayerConformance conformance, LayerRunner runner, List<Integer> layers) {
        List<LayerReport> checks = new ArrayList<>();
        for (int l : layers) checks.add(conformance.check(l));
        LayerReport first = checks.stream().filter(c -> !c.conforms()).findFirst().orElse(null);
        return new Report(checks, first == null ? null : diagnose(conformance, runner, first));
    }

    /**
     * The diagnosis line of one failing layer of an open {@link k3j.conform.Conformance} (for a report's summary,
     * e.g. the checkpoint gate's failing-layer message): "L37 KDA attn_out 4.75e+04x budget: k_proj and q_proj
     * are swapped", or null when the layer conforms or did not run.
     */
    public static String diagnosisLine(k3j.conform.Conformance c, LayerReport failing, k3j.kernels.Workers workers) {
        if (failing.conforms() || c.model() == null) return null;
        try (LayerRunner runner = new LayerRunner(c.model(), workers)) {
            Diagnosis d = diagnose(new LayerConformance(c), runner, failing);
            return d == null ? null : d.summary();
        }
    }

    /**
     * Re-runs the failing layer once per candidate that reaches its first failing stage. Null when the layer
     * did not run at all (a missing tensor: the binder's message already names it) or no stage is over budget.
     */
    public static Diagnosis diagnose(LayerConformance conformance, LayerRunner runner, LayerReport failing) {
        if (failing.stages().isEmpty()) return null;
        Stage stage = Stage.firstFailing(failing);
        if (stage == null) return null;
        long t0 = System.nanoTime();
        int layer = failing.layer(), tried = 0;
        List<Explanation> found = new ArrayList<>();
        for (Candidate c : runner.candidates(layer, conformance.routedExperts(layer))) {
            if (!c.reaches(stage)) continue;
            tried++;
            LayerReport with = conformance.check(runner, layer, c);
            Stage first = Stage.firstFailing(with);
            if (first == null || first.ordinal() > stage.ordinal()) found.add(new Explanation(c, stage.ratio(with), first == null, first));
        }
        return new Diagnosis(layer, failing.kind(), stage, stage.ratio(failing), tried, found, System.nanoTime() - t0);
    }
}
