package k3j.verdict;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;

/**
 * The constants of the one verdict path, read from the product's own manifest {@code k3j/verdict/verdict-limits.json}
 * (docs/semantics.md §10.11 states each and why): none is chosen where a check is made.
 *
 * @param magnitudeMultiple      a value entering a verdict is refused when |x| &gt; this · max|reference| of its array
 * @param growthLimit            a lossy layer whose error growth exceeds this is a binding signature (OUTSIDE)
 * @param klNearZero             mean KL at or below this with top-1 agreement below {@code contradictionTop1} is a contradiction
 * @param contradictionTop1      percent: see {@code klNearZero}
 * @param defaultMaxKl           {@code --max-kl} when not given (nats)
 * @param defaultMinTop1         {@code --min-top1} when not given (percent)
 */
public record VerdictLimits(double magnitudeMultiple, double growthLimit, double klNearZero, double contradictionTop1, double defaultMaxKl,
                            double defaultMinTop1) {
    static final String RESOURCE = "verdict-limits.json";

    public VerdictLimits {
        if (!(magnitudeMultiple >= 1) || !(growthLimit > 1) || !(klNearZero >= 0) || !(contradictionTop1 > 0 && contradictionTop1 <= 100)
                || !(defaultMaxKl >= 0) || !(defaultMinTop1 > 0 && defaultMinTop1 <= 100)) {
            throw new IllegalStateException("k3j/verdict/" + RESOURCE + ": a limit outside its range");
        }
    }

    private static final VerdictLimits SHIPPED = load();

    /** The limits the product ships. */
    public static VerdictLimits shipped() {
        return SHIPPED;
    }

    private static VerdictLimits load() {
        try (InputStream in = VerdictLimits.class.getResourceAsStream(RESOURCE)) {
            if (in == null) throw new IllegalStateException("k3j/verdict/" + RESOURCE + " is missing from the jar");
            JsonNode m = new ObjectMapper().readTree(in);
            return new VerdictLimits(need(m, "magnitude_multiple"), need(m, "growth_limit"), need(m, "kl_near_zero"), need(m, "contradiction_top1_percent"),
                    need(m, "default_max_kl"), need(m, "default_min_top1_percent"));
        } catch (IOException e) {
            throw new IllegalStateException("k3j/verdict/" + RESOURCE + ": " + e.getMessage(), e);
        }
    }

    private static double need(JsonNode m, String key) {
        JsonNode v = m.get(key);
        if (v == null || !v.isNumber()) throw new IllegalStateException("k3j/verdict/" + RESOURCE + ": no number '" + key + "'");
        return v.doubleValue();
    }
}
