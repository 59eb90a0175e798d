package k3j.conform;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The rounding budget of the C engine's full-checkpoint conformance (docs/semantics.md §10.7): for a
 * stage's whole array, {@code ratio = max|engine − reference| / max|reference|} must stay under
 * {@code budget = eps32 · sqrt(width) · factor}, width = the compared vector's length (hidden size for the
 * layer stages, vocab size for logits, K for the MoE combine weights). With the default constants eps32 =
 * 1.2e-7 and factor = 50, hidden 7168 gives 5.08e-4: float32 rounding uses ~1e-3 of it, a wrong binding
 * misses by ~1, i.e. by thousands of budgets.
 *
 * <p>The constants come from the dump's manifest ({@code budget.eps32}, {@code budget.factor},
 * {@code budget.stages.<stage>.width}, {@code budget.logits.width}), so a dump can tighten them; a dump
 * without a {@code budget} section gets the default constants with the widths of its config, and says so
 * ({@link #source()}).
 */
public record Budget(double eps32, double factor, Map<String, Integer> widths, String source) {
    public static final double DEFAULT_EPS32 = 1.2e-7, DEFAULT_FACTOR = 50.0;

    public Budget {
        widths = Map.copyOf(widths);
        if (!(eps32 > 0) || !(factor > 0)) throw new IllegalArgumentException("budget constants must be positive: eps32 " + eps32 + ", factor " + factor);
    }

    /** eps32 · sqrt(width) · factor for a stage (or "logits"). */
    public double of(String stage) {
        Integer w = widths.get(stage);
        if (w == null) throw new ConformException(Finding.REFERENCE_MISMATCH, "the budget has no width for '" + stage + "' (" + source + ")");
        return eps32 * Math.sqrt(w) * factor;
    }

    public int width(String stage) {
        Integer w = widths.get(stage);
        if (w == null) throw new ConformException(Finding.REFERENCE_MISMATCH, "the budget has no width for '" + stage + "' (" + source + ")");
        return w;
    }

    public String rule() {
        return String.format(java.util.Locale.ROOT, "ratio = max|engine - ref| / max|ref| over a stage's array; budget = %.3g * sqrt(width) * %.3g (%s)", eps32, factor, source);
    }

    static Budget of(ReferenceDump d) {
        JsonNode b = d.manifest().get("budget");
        if (b == null || b.isNull()) {
            JsonNode cfg = d.field("config");
            JsonNode text = cfg.has("text_config") ? cfg.get("text_config") : cfg;
            int e = need(text, "hidden_size", d), v = need(text, "vocab_size", d);
            Map<String, Integer> w = new LinkedHashMap<>();
            for (String s : Stage.NAMES) w.put(s, e);
            w.put("logits", v);
            if (text.has("num_experts_per_token")) w.put("moe_weight", text.get("num_experts_per_token").asInt());
            return new Budget(DEFAULT_EPS32, DEFAULT_FACTOR, w, "the default constants: the dump states no budget");
        }
        double eps = d.field("budget", "eps32").asDouble(), factor = d.field("budget", "factor").asDouble();
        Map<String, Integer> w = new LinkedHashMap<>();
        d.field("budget", "stages").properties().forEach(en -> {
            JsonNode width = en.getValue().get("width");
            if (width == null || !width.canConvertToInt()) throw ReferenceDump.mismatch(d.source() + ": manifest budget.stages." + en.getKey() + " has no width");
            w.put(en.getKey(), width.intValue());
        });
        w.put("logits", d.field("budget", "logits", "width").asInt());
        Budget budget = new Budget(eps, factor, w, "the dump's manifest");
        // a stage's stored budget must be the rule's; a hand-tightened figure without its factor would be ambiguous
        d.field("budget", "stages").properties().forEach(en -> check(d, budget, en.getKey(), en.getValue()));
        check(d, budget, "logits", d.field("budget", "logits"));
        return budget;
    }

    private static void check(ReferenceDump d, Budget b, String stage, JsonNode entry) {
        JsonNode stored = entry.get("budget");
        if (stored == null) return;
        double want = b.of(stage);
        if (Math.abs(stored.asDouble() - want) > 1e-9 * want) {
            throw ReferenceDump.mismatch(d.source() + ": manifest budget." + stage + ".budget " + stored.asDouble() + " is not eps32 * sqrt(width) * factor = " + want);
        }
    }

    private static int need(JsonNode cfg, String key, ReferenceDump d) {
        JsonNode v = cfg.get(key);
        if (v == null || !v.canConvertToInt()) throw ReferenceDump.mismatch(d.source() + ": manifest config has no " + key);
        return v.intValue();
    }
}
