package k3j.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * RMSNorm (docs/semantics.md §3.1) and the KDA L2 norm (§3.10). The sum of squares is ONE sequential double chain
 * (it cannot be vectorised without changing its order); the fast path vectorises only the elementwise
 * float multiplies, which are the same two roundings per element.
 */
public final class Norms {
    private Norms() {}

    /** The L2 norm's hard-coded eps (float 1e-6, independent of rms_eps). */
    public static final float L2_EPS = 1e-6f;

    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;

    /** inv = (float)(1 / sqrt(Σx²/n + eps)), the sum sequential in double, eps a widened float inside the sqrt. */
    public static float rmsInverse(float[] x, int off, int n, float eps) {
        double ss = 0.0;
        for (int i = 0; i < n; i++) ss = ss + (double) x[off + i] * (double) x[off + i];
        return (float) (1.0 / Math.sqrt(ss / (double) n + (double) eps));
    }

    /** inv = (float)(1 / sqrt(Σx² + 1e-6f)): a SUM, not a mean. */
    public static float l2Inverse(float[] x, int off, int n) {
        double ss = 0.0;
        for (int i = 0; i < n; i++) ss = ss + (double) x[off + i] * (double) x[off + i];
        return (float) (1.0 / Math.sqrt(ss + (double) L2_EPS));
    }

    /** Reference RMSNorm of rows [rows][n]: y = (w · x) · inv, w first. y may be x. */
    public static void rmsnormReference(float[] y, float[] x, float[] w, int rows, int n, float eps) {
        for (int r = 0; r < rows; r++) {
            int off = r * n;
            float inv = rmsInverse(x, off, n, eps);
            for (int i = 0; i < n; i++) y[off + i] = (w[i] * x[off + i]) * inv;
        }
    }

    /** Fast RMSNorm, bit-identical to the reference. y may be x. */
    public static void rmsnorm(float[] y, float[] x, float[] w, int rows, int n, float eps) {
        if (!KernelPath.vector((long) rows * n)) {
            rmsnormReference(y, x, w, rows, n, eps);
            return;
        }
        for (int r = 0; r < rows; r++) {
            int off = r * n;
            float inv = rmsInverse(x, off, n, eps);
            int i = 0;
            for (; i + 8 <= n; i += 8) {
                FloatVector.fromArray(F, w, i).mul(FloatVector.fromArray(F, x, off + i)).mul(inv).intoArray(y, off + i);
            }
            for (; i < n; i++) y[off + i] = (w[i] * x[off + i]) * inv;
        }
    }

    /** Reference L2 norm of rows [rows][n], in place allowed: v = v · inv. */
    public static void l2normReference(float[] y, float[] x, int rows, int n) {
        for (int r = 0; r < rows; r++) {
            int off = r * n;
            float inv = l2Inverse(x, off, n);
            for (int i = 0; i < n; i++) y[off + i] = x[off + i] * inv;
        }
    }

    /** Fast L2 norm, bit-identical to the reference. */
    public static void l2norm(float[] y, float[] x, int rows, int n) {
        if (!KernelPath.vector((long) rows * n)) {
            l2normReference(y, x, rows, n);
            return;
        }
        for (int r = 0; r < rows; r++) {
            int off = r * n;
            float inv = l2Inverse(x, off, n);
            int i = 0;
            for (; i + 8 <= n; i += 8) FloatVector.fromArray(F, x, off + i).mul(inv).intoArray(y, off + i);
            for (; i < n; i++) y[off + i] = x[off + i] * inv;
        }
    }
}
