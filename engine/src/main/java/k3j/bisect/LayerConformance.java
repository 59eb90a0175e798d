package k3j.bisect;

import java.util.Arrays;
import java.util.EnumMap;
import java.util.Map;
import k3j.model.LayerStages;

/**
 * Per-layer conformance as bisect uses it: each layer runs ALONE from the dump's own inputs (partial_in and
 * the snapshots it sees, fresh state, all T tokens, FORMAT.md §6) and every stage is held to the manifest's
 * budget (ratio = max|engine − ref| / max|ref|, the C engine's conform_all rule). Because every layer starts
 * from the reference's inputs, a wrong layer fails alone: the layers after it still conform.
 */
public final class LayerConformance {
    private final ReferenceLayers ref;

    public LayerConformance(ReferenceLayers ref) {
        this.ref = ref;
    }

    public ReferenceLayers reference() {
        return ref;
    }

    /** Runs layer {@code layer} as the model binds it and checks it. */
    public LayerCheck check(LayerRunner runner, int layer) {
        return compare(layer, runner.run(layer, ref.partialIn(layer), ref.snapshots(layer), ref.tokens()));
    }

    /** Runs layer {@code layer} with {@code c} applied and checks it. */
    public LayerCheck check(LayerRunner runner, int layer, Candidate c) {
        return compare(layer, runner.run(layer, c, ref.partialIn(layer), ref.snapshots(layer), ref.tokens()));
    }

    /** Every stage of {@code got} against the reference, in computation order. */
    public LayerCheck compare(int layer, LayerStages got) {
        Map<Stage, Double> ratios = new EnumMap<>(Stage.class);
        int[] want = ref.moeIdx(layer);
        for (Stage s : Stage.values()) {
            if (s == Stage.ROUTING) {
                if (want == null && got.moeIdx() == null) continue;
                ratios.put(s, want != null && Arrays.equals(want, got.moeIdx()) ? 0.0 : Double.POSITIVE_INFINITY);
            } else {
                ratios.put(s, relative(s.of(got), ref.stage(layer, s)) / ref.budget(s));
            }
        }
        return new LayerCheck(layer, ref.mixer(layer), ratios);
    }

    /** max|got − want| / max|want|; infinite on a length mismatch or a NaN. */
    static double relative(float[] got, float[] want) {
        if (got == null || got.length != want.length) return Double.POSITIVE_INFINITY;
        double diff = 0.0, scale = 0.0;
        for (int i = 0; i < got.length; i++) {
            double d = Math.abs((double) got[i] - want[i]);
            if (Double.isNaN(d)) return Double.POSITIVE_INFINITY;
            diff = Math.max(diff, d);
            scale = Math.max(scale, Math.abs((double) want[i]));
        }
        if (scale == 0.0) return diff == 0.0 ? 0.0 : Double.POSITIVE_INFINITY;
        return diff / scale;
    }
}
