package k3j.dump;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.LinkedHashMap;
import java.util.Map;
import k3j.config.ModelConfig;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * The rounding budget of the C engine's full-checkpoint conformance (docs/semantics.md §10.7): for a
 * stage's whole array, {@code ratio = max|engine − reference| / max|reference|} must stay under
 * {@code budget = eps32 · sqrt(width) · factor}, width = the length of the reduction each compared value is
 * (hidden size for the layer stages and for the logits, which are the LM head's dot products over E; K for the MoE
 * combine weights; docs/semantics.md §12, invariant 6). With the default constants eps32 =
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
        if (!(eps32 > 0) || !(factor > 0)) throw new ConformException(Finding.REFERENCE_MISMATCH, "budget constants must be positive: eps32 " + eps32 + ", factor " + factor + " (" + source + ")");
    }

    /** eps32 · sqrt(width) · factor for a stage (or "logits"). */
    public double of(String stage) {
        Integer w = widths.get(stage);
        if (w == null) throw new ConformException(Finding.REFERENCE_MISMATCH, "the budget has no width for '" + stage + "' (" + source + ")");
        return eps32 * Math.sqrt(w) * factor;
    }

    /** eps32 · sqrt(width) · factor for a vector of {@code width} elements. */
    public double ofWidth(int width) {
        return eps32 * Math.sqrt(width) * factor;
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
            int e = need(text, "hidden_size", d);
            Map<String, Integer> w = new LinkedHashMap<>();
            for (String s : Stage.NAMES) w.put(s, e);
            w.put("logits", e);   // a logit is the LM head's dot product over the hidden width, not a reduction over V
            if (text.has("num_experts_per_token")) w.put("moe_weight", text.get("num_experts_per_token").asInt());
            return new Budget(DEFAULT_EPS32, DEFAULT_FACTOR, w, "the default constants: the dump states no budget");
        }
        JsonNode epsNode = d.field("budget", "eps32"), factorNode = d.field("budget", "factor");
        if (!epsNode.isNumber() || !factorNode.isNumber()) throw ReferenceDump.mismatch(d.source() + ": manifest budget.eps32 and budget.factor must be numbers");
        double eps = epsNode.asDouble(), factor = factorNode.asDouble();
        looseness(eps, factor, d.source().toString());
        Map<String, Integer> w = new LinkedHashMap<>();
        d.field("budget", "stages").properties().forEach(en -> {
            JsonNode width = en.getValue().get("width");
            if (width == null || !width.isIntegralNumber() || !width.canConvertToInt()) throw ReferenceDump.mismatch(d.source() + ": manifest budget.stages." + en.getKey() + " has no width");
            w.put(en.getKey(), width.intValue());
        });
        JsonNode lw = d.field("budget", "logits", "width");
        if (!lw.isIntegralNumber() || !lw.canConvertToInt()) throw ReferenceDump.mismatch(d.source() + ": manifest budget.logits.width is not an int");
        w.put("logits", lw.intValue());
        Budget budget = new Budget(eps, factor, w, "the dump's manifest");
        // a stage's stored budget must be the rule's; a hand-tightened figure without its factor would be ambiguous
        d.field("budget", "stages").properties().forEach(en -> check(d, budget, en.getKey(), en.getValue()));
        check(d, budget, "logits", d.field("budget", "logits"));
        return budget;
    }

    /**
     * Refuses a budget this harness did not derive for {@code c}: constants looser than the harness's defaults (a dump may
     * tighten, never loosen), and any width other than the compared vector's length under the model's config
     * (hidden size for the layer stages and the logits, K for moe_weight, N for moe_choice). A dump that sets
     * {@code factor = 1e12} or a width of 2^31 - 1 would pass any model; it is refused naming the field.
     */
    public void check(ModelConfig c, String source) {
        looseness(eps32, factor, source);
        Map<String, Integer> want = derivedWidths(c);
        for (Map.Entry<String, Integer> e : widths.entrySet()) {
            Integer w = want.get(e.getKey());
            String field = e.getKey().equals("logits") ? "budget.logits.width" : "budget.stages." + e.getKey() + ".width";
            if (w == null) throw ReferenceDump.mismatch(source + ": manifest " + field + " names a stage this harness does not compare");
            if (!w.equals(e.getValue())) throw ReferenceDump.mismatch(source + ": manifest " + field + " = " + e.getValue() + ", but the config gives " + w);
        }
    }

    public static void looseness(double eps32, double factor, String source) {
        if (!(eps32 <= DEFAULT_EPS32 * (1 + 1e-9))) throw ReferenceDump.mismatch(source + ": manifest budget.eps32 = " + eps32 + " is looser than the harness's " + DEFAULT_EPS32);
        if (!(factor <= DEFAULT_FACTOR * (1 + 1e-9))) throw ReferenceDump.mismatch(source + ": manifest budget.factor = " + factor + " is looser than the harness's " + DEFAULT_FACTOR);
    }

    /** The width of every stage the harness judges, from the model's config. */
    static Map<String, Integer> derivedWidths(ModelConfig c) {
        Map<String, Integer> w = new LinkedHashMap<>();
        w.put("partial_in", c.hiddenSize());
        for (String s : Stage.NAMES) w.put(s, c.hiddenSize());
        w.put(Stage.MOE_WEIGHT, c.topK());
        w.put("moe_choice", c.expertCount());
        w.put("logits", c.hiddenSize());   // the LM head's dot product: each logit is a reduction over E
        return w;
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

    /** max|a|, the scale a budget is relative to. */
    public static double absMax(float[] a) {
        double m = 0;
        for (float x : a) m = Math.max(m, Math.abs(x));
        return m;
    }
}
