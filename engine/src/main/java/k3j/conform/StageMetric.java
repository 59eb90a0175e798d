package k3j.conform;

/**
 * One stage compared under the budget rule (docs/semantics.md §10.7): {@code ratio = maxAbsDiff / maxAbsRef} against {@code budget};
 * {@link #ratioToBudget()} is what a reader looks at (1 = the budget line). A length mismatch or a NaN in the
 * engine's output is an infinite ratio.
 */
public record StageMetric(String stage, int width, double maxAbsDiff, double maxAbsRef, double meanAbsDiff, double ratio, double budget) {

    public double ratioToBudget() {
        return ratio / budget;
    }

    public Finding finding() {
        return Finding.ofRatio(ratioToBudget());
    }

    /** Compares a whole array; {@code budget} from {@link Budget#of(String)}. */
    public static StageMetric of(String stage, int width, float[] engine, float[] reference, double budget) {
        if (engine == null || engine.length != reference.length) {
            return new StageMetric(stage, width, Double.POSITIVE_INFINITY, absMax(reference), Double.POSITIVE_INFINITY, Double.POSITIVE_INFINITY, budget);
        }
        double worst = 0, ref = 0, sum = 0;
        boolean nan = false;
        for (int i = 0; i < engine.length; i++) {
            double d = Math.abs((double) engine[i] - (double) reference[i]);
            if (Double.isNaN(d)) nan = true;
            else {
                worst = Math.max(worst, d);
                sum += d;
            }
            ref = Math.max(ref, Math.abs((double) reference[i]));
        }
        if (nan) worst = Double.POSITIVE_INFINITY;
        double ratio = worst == 0 ? 0 : ref == 0 ? Double.POSITIVE_INFINITY : worst / ref;
        return new StageMetric(stage, width, worst, ref, engine.length == 0 ? 0 : sum / engine.length, ratio, budget);
    }

    static double absMax(float[] a) {
        double m = 0;
        for (float x : a) m = Math.max(m, Math.abs(x));
        return m;
    }
}
