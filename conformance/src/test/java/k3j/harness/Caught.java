package k3j.harness;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One wrong port the suite plants on purpose (a torch mutant, a binding mutant, an expert corruption, a tampered
 * dump) and what caught it: a row of the report's "what the harness catches" table. A gate attaches the row as
 * soon as it has judged the plant, before its assertions, so a plant that nothing catches still shows as a row
 * (with no category) and its case fails.
 *
 * @param kind     "torch mutant", "binding mutant", "expert corruption" or "tampered dump"
 * @param planted  what is wrong, in the gate's words
 * @param layer    the layer that caught it, or null (model level, or refused before any layer ran)
 * @param stage    the stage (or expert, or the refused field) that caught it, or null
 * @param category the finding's tag ("[binding error]", "[reference mismatch]", ...), or null when nothing caught it
 * @param ratio    that stage's ratio to budget, or null when none applies (a refusal)
 */
public record Caught(String kind, String planted, Integer layer, String stage, String category, Double ratio) {
    /** The attachment's name the report collects. */
    public static final String ATTACHMENT = "caught";

    public static Caught missed(String kind, String planted) {
        return new Caught(kind, planted, null, null, null, null);
    }

    public void attach() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", kind);
        m.put("planted", planted);
        m.put("layer", layer);
        m.put("stage", stage);
        m.put("category", category);
        m.put("ratio_to_budget", ratio == null || !Double.isFinite(ratio) ? (ratio == null ? null : String.valueOf(ratio)) : ratio);
        Evidence.json(ATTACHMENT, m);
    }
}
