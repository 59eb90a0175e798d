package k3j.fleet;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Locale;
import k3j.compare.LayerSelection;
import k3j.verdict.Finding;

/**
 * The text and JSON verdict of what was judged: one code for a one-machine run and for the merge of its shards, so the two
 * print the same summary, first divergence and verdict line.
 */
public final class Summary {
    private Summary() {}

    /**
     * The block after the layer lines: counts, worst stage within budget, layers per finding, first divergence, and the
     * layers' count line. None of it is the decision: the run's VERDICT line ({@link k3j.verdict.Verdict#line()}) follows it.
     */
    public static String layers(Judged j, List<Integer> selection, double seconds) {
        StringBuilder sb = new StringBuilder();
        int failed = j.failing().size();
        long kda = j.layers().stream().filter(r -> r.kind().startsWith("KDA")).count();
        sb.append("=".repeat(78)).append('\n');
        sb.append(String.format(Locale.ROOT, "LAYERS %s   %d within budget, %d not   (%d KDA, %d MLA)   %.1f s total%n", LayerSelection.format(selection),
                j.layers().size() - failed, failed, kda, j.layers().size() - kda, seconds));
        sb.append(String.format(Locale.ROOT, "worst stage across the layers within budget: %.3gx of its rounding budget%n", worstPassing(j)));
        if (failed > 0) sb.append("causes, read from every selected layer together (docs/semantics.md §10.10; the lines above give each layer's band alone):\n");
        for (Finding f : Finding.values()) {
            List<Integer> found = layersWith(j, f);
            if (f != Finding.CONFORMS && !found.isEmpty()) sb.append(String.format(Locale.ROOT, "%-22s %d layer(s): %s%n", f.tag(), found.size(), LayerSelection.format(found)));
        }
        Judged.Layer first = firstDivergence(j);
        if (first != null) sb.append(firstDivergenceLine(first)).append('\n');
        sb.append(layersLine(j, selection.size())).append('\n');
        sb.append("=".repeat(78)).append('\n');
        return sb.toString();
    }

    /** The expert sweep block, its layers' lines and failing experts, its counts and verdict. */
    public static String sweep(Judged j, double seconds) {
        StringBuilder sb = new StringBuilder("\n===== EXPERT SWEEP (every routed expert on the dump's probes) =====\n");
        sb.append(j.sweep()).append('\n');
        int checked = 0, total = 0, failed = 0;
        for (Judged.Experts x : j.experts()) {
            var e = x.report();
            sb.append(e.line()).append('\n');
            for (var m : e.failing()) sb.append("    ").append(m.message()).append('\n');
            checked += e.checked();
            total += e.total();
            if (!e.conforms()) failed++;
        }
        sb.append(expertsLine(j.experts().size(), failed, checked, total, seconds)).append('\n');
        return sb.toString();
    }

    /**
     * The expert sweep's count line (not the decision, so no pass word): how many swept MoE layers had every expert
     * within budget; with no MoE layer selected it says nothing was swept (the decision holds the sweep not judged).
     */
    public static String expertsLine(int layers, int failed, int checked, int total, double seconds) {
        if (layers == 0) return "EXPERTS: no MoE layer among the selected layers: no expert was swept";
        return String.format(Locale.ROOT, "EXPERTS: %d of %d swept MoE layers with every expert within budget; experts checked: %d of %d; %.1f s", layers - failed, layers,
                checked, total, seconds);
    }

    /** The layers' count line (not the decision, so no pass word): "LAYERS: 23 of 24 judged within budget; 1 not; 0 not judged". */
    public static String layersLine(Judged j, int selected) {
        int failed = j.failing().size(), judged = j.layers().size();
        return "LAYERS: " + (judged - failed) + " of " + selected + " within budget; " + failed + " not; " + (selected - judged) + " not judged";
    }

    public static String firstDivergenceLine(Judged.Layer first) {
        return "FIRST DIVERGENCE: " + first.name() + (first.firstDivergence() != null ? " " + first.firstDivergence() : "") + " " + first.finding().tag();
    }

    public static Judged.Layer firstDivergence(Judged j) {
        return j.layers().stream().filter(r -> !r.conforms()).findFirst().orElse(null);
    }

    public static List<Integer> layersWith(Judged j, Finding f) {
        return j.layers().stream().filter(r -> r.finding() == f).map(Judged.Layer::layer).toList();
    }

    /** The worst stage's ratio to its budget among the passing layers (0 when none passed). */
    public static double worstPassing(Judged j) {
        return j.layers().stream().filter(Judged.Layer::conforms).mapToDouble(Judged.Layer::worstRatioToBudget).max().orElse(0);
    }

    /**
     * The "summary" object of --json: equal between a one-machine run and the merge of its shards (no timing in it).
     * {@code decision} is the run's one decision ({@link k3j.verdict.Invariants#decide}); {@code notJudged} names what a
     * merge could not judge (empty when complete).
     */
    public static void putVerdict(ObjectNode root, Judged j, List<Integer> selection, k3j.verdict.Verdict decision, List<String> notJudged) {
        ObjectNode v = root.putObject("summary");
        v.put("verdict", decision.outcome().words());
        v.put("line", decision.line());
        if (decision.reference() != null) v.put("reference", decision.reference());
        v.put("layers_line", layersLine(j, selection.size()));
        v.put("layers", LayerSelection.format(selection));
        v.put("layers_failed", j.failing().size());
        Judged.Layer first = firstDivergence(j);
        if (first != null) v.put("first_divergence", firstDivergenceLine(first));
        v.put("worst_passing_ratio_to_budget", worstPassing(j));
        ObjectNode by = v.putObject("findings");
        for (Finding f : Finding.values()) {
            List<Integer> found = layersWith(j, f);
            if (!found.isEmpty()) by.put(f.name(), LayerSelection.format(found));
        }
        ObjectNode checks = v.putObject("checks");
        for (Judged.Block b : j.logits()) checks.put(b.name(), b.conforms());
        if (j.greedy() != null) checks.put(j.greedy().name(), j.greedy().conforms());
        if (!j.experts().isEmpty()) checks.put("experts", j.experts().stream().allMatch(e -> e.whole() && e.report().conforms()));
        notJudged.forEach(v.putArray("not_judged")::add);
    }
}
