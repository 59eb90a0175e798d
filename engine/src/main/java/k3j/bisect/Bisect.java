package k3j.bisect;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Names the first layer and stage that leave the reference, then diagnoses it: the failing layer is re-run
 * once per {@link Candidates candidate} that reaches the failing stage (it changes a tensor that stage
 * reads), and every candidate that brings that stage within budget is reported. One layer per candidate,
 * never the model: on mini-k3-93 a diagnosis is milliseconds per candidate.
 */
public final class Bisect {
    private Bisect() {}

    /** A candidate that makes the failing stage pass; {@code layerPasses}: and every other stage of the layer too. */
    public record Explanation(Candidate candidate, double stageRatio, boolean layerPasses, Stage stillFailing) {
        public String describe() {
            return candidate.describe() + (layerPasses ? "" : " (explains " + "this stage; the layer still fails at " + stillFailing.key + ")");
        }
    }

    /** The diagnosis of the first failing layer: its stage, how far over budget, what explains it. */
    public record Diagnosis(int layer, String mixer, Stage stage, double ratio, int tried, List<Explanation> explanations, long nanos) {
        public Diagnosis {
            explanations = List.copyOf(explanations);
        }

        public boolean explained() {
            return !explanations.isEmpty();
        }

        /** "L37 (kda) attn_out: q_proj and k_proj are swapped" or "... nothing explains it (tried N candidates)". */
        public String summary() {
            String head = String.format(Locale.ROOT, "L%d (%s) %s fails at %.3g x budget", layer, mixer, stage.key, ratio);
            if (explanations.isEmpty()) {
                return head + ": nothing explains it (tried " + tried + " candidates: same-shape swaps, transposes, expert nibble flips, expert swaps)";
            }
            List<String> d = explanations.stream().map(Explanation::describe).toList();
            return head + ": " + String.join("; or ", d);
        }
    }

    /** Every checked layer and, when one fails, the diagnosis of the first. */
    public record Report(List<LayerCheck> layers, Diagnosis diagnosis) {
        public Report {
            layers = List.copyOf(layers);
        }

        public List<Integer> failing() {
            return layers.stream().filter(l -> !l.passes()).map(LayerCheck::layer).toList();
        }

        public String summary() {
            if (diagnosis == null) return "all " + layers.size() + " layers conform";
            List<Integer> f = failing();
            return diagnosis.summary() + " [" + f.size() + " of " + layers.size() + " layers fail: " + f + "]";
        }
    }

    /** Checks layers {@code from..to} (inclusive) in order and diagnoses the first failing one. */
    public static Report run(LayerRunner runner, LayerConformance conformance, int from, int to) {
        List<LayerCheck> checks = new ArrayList<>();
        for (int l = from; l <= to; l++) checks.add(conformance.check(runner, l));
        LayerCheck first = checks.stream().filter(c -> !c.passes()).findFirst().orElse(null);
        return new Report(checks, first == null ? null : diagnose(runner, conformance, first));
    }

    /** Re-runs the failing layer once per candidate that reaches its first failing stage. */
    public static Diagnosis diagnose(LayerRunner runner, LayerConformance conformance, LayerCheck failing) {
        long t0 = System.nanoTime();
        int layer = failing.layer();
        Stage stage = failing.firstFailing();
        if (stage == null) throw new IllegalArgumentException("layer " + layer + " conforms; there is nothing to diagnose");
        int tried = 0;
        List<Explanation> found = new ArrayList<>();
        for (Candidate c : runner.candidates(layer, conformance.reference().moeIdx(layer))) {
            if (!c.reaches(stage)) continue;
            tried++;
            LayerCheck with = conformance.check(runner, layer, c);
            double r = with.ratio(stage);
            if (r <= 1.0 && stagesBefore(with, stage)) found.add(new Explanation(c, r, with.passes(), with.firstFailing()));
        }
        return new Diagnosis(layer, failing.mixer(), stage, failing.ratio(stage), tried, found, System.nanoTime() - t0);
    }

    /** The stages before {@code stage} still pass: a candidate must not trade this failure for an earlier one. */
    private static boolean stagesBefore(LayerCheck c, Stage stage) {
        for (var e : c.ratios().entrySet()) {
            if (e.getKey() == stage) return true;
            if (!(e.getValue() <= 1.0)) return false;
        }
        return true;
    }
}
