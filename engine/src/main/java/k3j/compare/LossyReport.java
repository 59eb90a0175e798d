package k3j.compare;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;
import k3j.verdict.VerdictLimits;

/**
 * The graded verdict of a lossy port ({@code k3 conform --candidate DUMP --lossy}, {@code k3 compare-logits --lossy}): its
 * layers ({@link LossyLayers}, null when only logits are compared) and each logits array it holds ({@link LossyLogits}:
 * full recompute, incremental), decided by {@link Invariants#decide} on every item. A port without logits cannot meet a
 * threshold: it is reported missing and the verdict is INCOMPLETE; an array with a non-finite or implausible value is
 * refused, never graded.
 *
 * @param logits  by mode ("full recompute", "incremental"), the arrays the port holds and that were graded
 * @param missing what it does not hold, with the reason
 * @param refused arrays refused by invariant 1, with the reason
 */
public record LossyReport(LossyLayers layers, Map<String, LossyLogits> logits, List<String> missing, List<String> refused) {
    public LossyReport {
        logits = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(logits));
        missing = List.copyOf(missing);
        refused = List.copyOf(refused);
    }

    /** Grades the selected layers and, unless {@code withLogits} is false, every logits array of {@code c}. */
    public static LossyReport of(Conformance c, List<Integer> selection, boolean withLogits) {
        LossyLayers layers = LossyLayers.of(c, selection);
        Map<String, float[]> arrays = new LinkedHashMap<>();
        List<String> missing = new ArrayList<>();
        if (withLogits) {
            for (boolean incremental : new boolean[] {false, true}) {
                String mode = incremental ? "incremental" : "full recompute";
                try {
                    arrays.put(mode, c.engineLogits(incremental));
                } catch (ConformException e) {
                    if (e.finding() != Finding.MISSING_STAGE) throw e;
                    missing.add(mode + ": " + e.getMessage());
                }
            }
        }
        LossyReport l = ofLogits(arrays, c.dump().f32("logits"), c.tokens(), c.dump().shape("logits")[1], 0);
        List<String> allMissing = new ArrayList<>(missing);
        allMissing.addAll(l.missing());
        return new LossyReport(layers, l.logits(), allMissing, l.refused());
    }

    /** Grades each named [rows][vocab] candidate array against the reference's rows (no layers): compare-logits --lossy. */
    public static LossyReport ofLogits(Map<String, float[]> candidates, float[] reference, int rows, int vocab, int first) {
        Map<String, LossyLogits> graded = new LinkedHashMap<>();
        List<String> refused = new ArrayList<>();
        candidates.forEach((mode, got) -> {
            String bad = Invariants.implausible("logits (" + mode + ")", got, reference, VerdictLimits.shipped());
            if (bad != null) refused.add(bad);
            else graded.put(mode, LossyLogits.grade(got, reference, rows, vocab, first));
        });
        return new LossyReport(null, graded, List.of(), refused);
    }

    /** The one decision on every item: layers (binding signature), refused arrays, missing arrays, each graded array by the thresholds. */
    public Verdict verdict(Double maxKl, Double minTop1) {
        VerdictLimits lim = VerdictLimits.shipped();
        List<Invariants.Item> items = new ArrayList<>();
        if (layers != null) items.addAll(layers.items(lim));
        for (String r : refused) items.add(Invariants.Item.refused("logits", r));
        for (String m : missing) items.add(Invariants.Item.notJudged("logits", m));
        logits.forEach((mode, l) -> items.add(l.item("logits (" + mode + ")", maxKl, minTop1, lim)));
        return Invariants.decide(Invariants.Mode.LOSSY, items);
    }

    /** The thresholds in force: the user's, or the shipped defaults (said so). */
    public static String thresholds(Double maxKl, Double minTop1) {
        VerdictLimits lim = VerdictLimits.shipped();
        return String.format(Locale.ROOT, "mean KL <= %.4g%s, same top-1 >= %.4g%%%s", maxKl != null ? maxKl : lim.defaultMaxKl(), maxKl != null ? "" : " (default)",
                minTop1 != null ? minTop1 : lim.defaultMinTop1(), minTop1 != null ? "" : " (default)");
    }

    public String text(Double maxKl, Double minTop1) {
        StringBuilder sb = new StringBuilder();
        if (layers != null) {
            sb.append("===== GRADED LAYERS (--lossy: NMSE per stage, not the float32 budget) =====\n");
            sb.append(layers.text());
            sb.append(layers.worstLine()).append('\n');
        }
        for (var en : logits.entrySet()) {
            sb.append("\n===== GRADED LOGITS (").append(en.getKey()).append(") =====\n").append(en.getValue().text());
        }
        for (String m : missing) sb.append('\n').append(Finding.MISSING_STAGE.tag()).append(" logits ").append(m).append('\n');
        for (String r : refused) sb.append('\n').append("REFUSED (invariant 1): ").append(r).append('\n');
        sb.append("\nthresholds            : ").append(thresholds(maxKl, minTop1)).append('\n');
        sb.append(verdict(maxKl, minTop1).text());
        return sb.toString();
    }

    public Map<String, Object> json(Double maxKl, Double minTop1) {
        Map<String, Object> m = new LinkedHashMap<>();
        if (layers != null) m.put("layers", layers.json());
        Map<String, Object> l = new LinkedHashMap<>();
        logits.forEach((k, v) -> l.put(k, v.json()));
        m.put("logits", l);
        m.put("missing", missing);
        m.put("refused", refused);
        if (maxKl != null) m.put("max_kl", maxKl);
        if (minTop1 != null) m.put("min_top1_percent", minTop1);
        Verdict v = verdict(maxKl, minTop1);
        m.put("verdict", v.outcome() == Verdict.Outcome.WITHIN ? "within" : v.outcome() == Verdict.Outcome.OUTSIDE ? "outside" : v.outcome().name().toLowerCase(Locale.ROOT));
        m.put("decision", v.json());
        return m;
    }
}
