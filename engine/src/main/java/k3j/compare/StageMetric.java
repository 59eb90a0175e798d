package k3j.compare;

import java.util.Locale;
import k3j.dump.Budget;
import k3j.verdict.Finding;

/**
 * One stage compared under the budget rule (docs/semantics.md §10.7): {@code ratio = maxAbsDiff / maxAbsRef} against {@code budget};
 * {@link #ratioToBudget()} is what a reader looks at (1 = the budget line). A length mismatch is an infinite
 * ratio. A NaN or infinity on EITHER side is {@link Finding#NON_FINITE} whatever the ratio says: max|diff|
 * over finite elements alone would hide it, and NaN compares false against any budget.
 *
 * @param elements     the compared length (the reference's)
 * @param refFinite    finite elements of the reference
 * @param engineFinite finite elements of the engine's output (0 when it is missing or of another length)
 * @param correlation  Pearson correlation of the difference (engine − ref) with the reference: near 0 for rounding or
 *                     noise, far from 0 for a wrong constant, formula or binding (NaN when either side is constant or
 *                     not finite, or the lengths differ); what {@link Causes} tells precision from the rest by
 */
public record StageMetric(String stage, int width, double maxAbsDiff, double maxAbsRef, double meanAbsDiff, double ratio, double budget,
        int elements, int refFinite, int engineFinite, double correlation) {

    public double ratioToBudget() {
        return ratio / budget;
    }

    /** Every element finite on both sides. */
    public boolean finite() {
        return refFinite == elements && engineFinite == elements;
    }

    public Finding finding() {
        return finite() ? Finding.ofRatio(ratioToBudget()) : Finding.NON_FINITE;
    }

    /** "finite ref 40/40, engine 39/40". */
    public String finiteCounts() {
        return String.format(Locale.ROOT, "finite ref %d/%d, engine %d/%d", refFinite, elements, engineFinite, elements);
    }

    /** Compares a whole array; {@code budget} from {@link Budget#of(String)}. */
    public static StageMetric of(String stage, int width, float[] engine, float[] reference, double budget) {
        int refFinite = finiteCount(reference);
        if (engine == null || engine.length != reference.length) {
            return new StageMetric(stage, width, Double.POSITIVE_INFINITY, Budget.absMax(reference), Double.POSITIVE_INFINITY, Double.POSITIVE_INFINITY, budget,
                    reference.length, refFinite, 0, Double.NaN);
        }
        double worst = 0, ref = 0, sum = 0;
        for (int i = 0; i < engine.length; i++) {
            double d = Math.abs((double) engine[i] - (double) reference[i]);
            if (!Double.isFinite(d)) d = Double.POSITIVE_INFINITY;   // NaN must not vanish from max()
            worst = Math.max(worst, d);
            sum += d;
            ref = Math.max(ref, Math.abs((double) reference[i]));
        }
        double ratio = worst == 0 ? 0 : ref == 0 || !Double.isFinite(ref) ? Double.POSITIVE_INFINITY : worst / ref;
        return new StageMetric(stage, width, worst, ref, engine.length == 0 ? 0 : sum / engine.length, ratio, budget,
                reference.length, refFinite, finiteCount(engine), correlation(engine, reference));
    }

    /** Pearson correlation of (engine − reference) with reference, in double; NaN when either is constant or not finite. */
    static double correlation(float[] engine, float[] reference) {
        int n = reference.length;
        double mr = 0, md = 0;
        for (int i = 0; i < n; i++) {
            mr += reference[i];
            md += (double) engine[i] - reference[i];
        }
        mr /= n;
        md /= n;
        double srd = 0, srr = 0, sdd = 0;
        for (int i = 0; i < n; i++) {
            double r = reference[i] - mr, d = (double) engine[i] - reference[i] - md;
            srd += r * d;
            srr += r * r;
            sdd += d * d;
        }
        double c = srd / Math.sqrt(srr * sdd);
        return Double.isFinite(c) ? c : Double.NaN;
    }

    static int finiteCount(float[] a) {
        int n = 0;
        for (float x : a) if (Float.isFinite(x)) n++;
        return n;
    }
}
