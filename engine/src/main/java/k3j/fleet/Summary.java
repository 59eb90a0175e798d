package k3j.fleet;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.List;
import java.util.Locale;
import k3j.conform.Finding;
import k3j.conform.LayerSelection;

/**
 * The text and JSON verdict of what was judged: one code for a one-machine run and for the merge of its shards, so the two
 * print the same summary, first divergence and verdict line.
 */
public final class Summary {
    private Summary() {}

    /** The block after the layer lines: counts, worst passing stage, layers per finding, first divergence, verdict. */
    public static String layers(Judged j, List<Integer> selection, double seconds) {
        StringBuilder sb = new StringBuilder();
        int failed = j.failing().size();
        long kda = j.layers().stream().filter(r -> r.kind().startsWith("KDA")).count();
        sb.append("=".repeat(78)).append('\n');
        sb.append(String.format(Locale.ROOT, "LAYERS %s   %d passed, %d failed   (%d KDA, %d MLA)   %.1f s total%n", LayerSelection.format(selection),
                selection.size() - failed, failed, kda, j.layers().size() - kda, seconds));
        sb.append(String.format(Locale.ROOT, "worst stage across all passing layers: %.3gx of its rounding budget%n", worstPassing(j)));
        if (failed > 0) sb.append("causes, read from every selected layer together (docs/semantics.md §10.10; the lines above give each layer's band alone):\n");
        for (Finding f : Finding.values()) {
            List<Integer> found = layersWith(j, f);
            if (f != Finding.CONFORMS && !found.isEmpty()) sb.append(String.format(Locale.ROOT, "%-22s %d layer(s): %s%n", f.tag(), found.size(), LayerSelection.format(found)));
        }
        Judged.Layer first = firstDivergence(j);
        if (first != null) sb.append(firstDivergenceLine(first)).append('\n');
        sb.append("=".repeat(78)).append('\n');
        sb.append(verdict(j)).append('\n');
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
        sb.append(String.format(Locale.ROOT, "EXPERTS %d of %d MoE layers conform; experts checked: %d of %d; %.1f s%n", j.experts().size() - failed, j.experts().size(),
                checked, total, seconds));
        sb.append(failed == 0 ? "VERDICT: EVERY EXPERT CONFORMS" : "VERDICT: EXPERTS OF " + failed + " LAYER(S) DO NOT CONFORM").append('\n');
        return sb.toString();
    }

    public static String verdict(Judged j) {
        int failed = j.failing().size();
        return failed == 0 ? "VERDICT: ALL LAYERS CONFORM" : "VERDICT: " + failed + " LAYER(S) DO NOT CONFORM";
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
     * {@code decision} is the run's one decision ({@link k3j.conform.Invariants#decide}); {@code notJudged} names what a
     * merge could not judge (empty when complete).
     */
    public static void putVerdict(ObjectNode root, Judged j, List<Integer> selection, k3j.conform.Verdict decision, List<String> notJudged) {
        ObjectNode v = root.putObject("summary");
        v.put("verdict", decision.outcome().words());
        v.put("line", decision.line());
        if (decision.reference() != null) v.put("reference", decision.reference());
        v.put("layers_line", decision.outcome() == k3j.conform.Verdict.Outcome.INCOMPLETE ? "VERDICT: INCOMPLETE" : verdict(j));
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
