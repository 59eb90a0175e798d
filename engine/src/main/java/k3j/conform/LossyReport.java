package k3j.conform;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The graded verdict of a lossy port ({@code k3 conform --candidate DUMP --lossy}): its layers ({@link LossyLayers})
 * and each logits array it holds ({@link LossyLogits}: full recompute, incremental), judged by the user's thresholds
 * on every logits array. A port without logits cannot meet a threshold: it is reported missing.
 *
 * @param logits  by mode ("full recompute", "incremental"), the arrays the port holds
 * @param missing what it does not hold, with the reason
 */
public record LossyReport(LossyLayers layers, Map<String, LossyLogits> logits, List<String> missing) {

    /** Grades the selected layers and, unless {@code withLogits} is false, every logits array of {@code c}. */
    public static LossyReport of(Conformance c, List<Integer> selection, boolean withLogits) {
        LossyLayers layers = LossyLayers.of(c, selection);
        Map<String, LossyLogits> logits = new LinkedHashMap<>();
        List<String> missing = new java.util.ArrayList<>();
        if (withLogits) {
            int v = c.dump().shape("logits")[1];
            float[] ref = c.dump().f32("logits");
            for (boolean incremental : new boolean[] {false, true}) {
                String mode = incremental ? "incremental" : "full recompute";
                try {
                    logits.put(mode, LossyLogits.grade(c.engineLogits(incremental), ref, c.tokens(), v, 0));
                } catch (ConformException e) {
                    if (e.finding() != Finding.MISSING_STAGE) throw e;
                    missing.add(mode + ": " + e.getMessage());
                }
            }
        }
        return new LossyReport(layers, logits, List.copyOf(missing));
    }

    /** Within the thresholds on every logits array (null: no threshold given, graded only); a port with no logits fails any threshold. */
    public Boolean passes(Double maxKl, Double minTop1) {
        if (maxKl == null && minTop1 == null) return null;
        if (logits.isEmpty()) return false;
        return logits.values().stream().allMatch(l -> Boolean.TRUE.equals(l.passes(maxKl, minTop1)));
    }

    public static String thresholds(Double maxKl, Double minTop1) {
        return (maxKl != null ? String.format(Locale.ROOT, "mean KL <= %.4g", maxKl) : "")
                + (maxKl != null && minTop1 != null ? ", " : "") + (minTop1 != null ? String.format(Locale.ROOT, "same top-1 >= %.4g%%", minTop1) : "");
    }

    public static String verdict(Boolean pass, Double maxKl, Double minTop1) {
        return pass == null ? "VERDICT: GRADED (no --max-kl / --min-top1 given: nothing judged)"
                : pass ? "VERDICT: WITHIN THE THRESHOLDS (" + thresholds(maxKl, minTop1) + ")" : "VERDICT: OUTSIDE THE THRESHOLDS (" + thresholds(maxKl, minTop1) + ")";
    }

    public String text(Double maxKl, Double minTop1) {
        StringBuilder sb = new StringBuilder();
        sb.append("===== GRADED LAYERS (--lossy: NMSE per stage, not the float32 budget) =====\n");
        sb.append(layers.text());
        sb.append(layers.worstLine()).append('\n');
        for (var en : logits.entrySet()) {
            sb.append("\n===== GRADED LOGITS (").append(en.getKey()).append(") =====\n").append(en.getValue().text());
        }
        for (String m : missing) sb.append('\n').append(Finding.MISSING_STAGE.tag()).append(" logits ").append(m).append('\n');
        sb.append('\n').append(verdict(passes(maxKl, minTop1), maxKl, minTop1)).append('\n');
        return sb.toString();
    }

    public Map<String, Object> json(Double maxKl, Double minTop1) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("layers", layers.json());
        Map<String, Object> l = new LinkedHashMap<>();
        logits.forEach((k, v) -> l.put(k, v.json()));
        m.put("logits", l);
        m.put("missing", missing);
        if (maxKl != null) m.put("max_kl", maxKl);
        if (minTop1 != null) m.put("min_top1_percent", minTop1);
        Boolean p = passes(maxKl, minTop1);
        m.put("verdict", p == null ? "graded" : p ? "within" : "outside");
        return m;
    }
}
