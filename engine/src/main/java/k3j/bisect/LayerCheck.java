package k3j.bisect;

import java.util.Collections;
import java.util.EnumMap;
import java.util.Map;

/**
 * One layer run against the reference: every stage's max|engine − ref| / max|ref| divided by its budget
 * (pass ≤ 1; routing is 0 when the selection is identical, infinite otherwise), in computation order.
 */
public record LayerCheck(int layer, String mixer, Map<Stage, Double> ratios) {
    public LayerCheck {
        ratios = Collections.unmodifiableMap(new EnumMap<>(ratios));
    }

    /** The first stage over budget in computation order, or null when the layer conforms. */
    public Stage firstFailing() {
        for (var e : ratios.entrySet()) if (!(e.getValue() <= 1.0)) return e.getKey();
        return null;
    }

    public boolean passes() {
        return firstFailing() == null;
    }

    public double worst() {
        double w = 0.0;
        for (double r : ratios.values()) w = Double.isNaN(r) ? Double.POSITIVE_INFINITY : Math.max(w, r);
        return w;
    }

    public double ratio(Stage s) {
        Double r = ratios.get(s);
        if (r == null) throw new IllegalArgumentException("layer " + layer + " has no stage " + s.key);
        return r;
    }
}
