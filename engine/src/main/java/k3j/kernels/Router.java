package k3j.kernels;

import java.lang.foreign.MemorySegment;

/**
 * The MoE router (docs/semantics.md §3.7, §12.2): per expert e,
 * logit_e = Σ_i (double)Wg[e][i]·(double)x[i] — ONE sequential double chain (not the matvec tree);
 * score_e = (float)(1 / (1 + StrictMath.exp(−logit_e))) from the DOUBLE logit, rounded once (docs/fp-contract.md §6:
 * a float logit before the sigmoid cost up to |logit| ulps of the score); choice_e = score_e + bias_e (float). Top-K
 * by repeated strict maximum over choice (ties → lowest index, NaN never picked, nothing pickable → index 0
 * weight 0), weights are the UNBIASED scores; if renormalize and K > 1: w_j = (float)(((double)w_j /
 * (Σ_j (double)w_j + 1e-20))·(double)scaling), one rounding; otherwise w_j = w_j · scaling (float).
 */
public final class Router {
    private Router() {}

    /** Router logits (double, never rounded to float) for one token: reference, one expert at a time. */
    static void logitsReference(double[] logits, float[] x, int xOff, Matrix wg) {
        int e = wg.cols();
        for (int r = 0; r < wg.rows(); r++) {
            double acc = 0.0;
            for (int i = 0; i < e; i++) acc = acc + (double) wg.get(r, i) * (double) x[xOff + i];
            logits[r] = acc;
        }
    }

    /** The same chains for one token from rows widened in bulk (the scalar path of small routers). */
    static void logitsScalar(double[] logits, float[] x, int xOff, Matrix wg) {
        int e = wg.cols(), n = wg.rows(), per = Math.max(1, Math.min(n, 8192 / e));
        float[] w = new float[per * e];
        short[] scratch = new short[wg.type() == WeightType.BF16 ? per * e : 0];
        for (int r0 = 0; r0 < n; r0 += per) {
            int m = Math.min(per, n - r0);
            wg.rows(r0, m, w, scratch);
            for (int k = 0; k < m; k++) {
                double acc = 0.0;
                for (int i = 0; i < e; i++) acc = acc + (double) w[k * e + i] * (double) x[xOff + i];
                logits[r0 + k] = acc;
            }
        }
    }

    /** Fast logits: four experts' chains in flight (each chain in its own sequential order), parallel over experts. */
    static void logitsFast(Workers workers, double[] logits, float[] x, int xOff, Matrix wg) {
        int e = wg.cols(), n = wg.rows();
        double[] xd = new double[e];
        for (int i = 0; i < e; i++) xd[i] = x[xOff + i];
        boolean bf16 = wg.type() == WeightType.BF16;
        MemorySegment seg = wg.data();
        workers.forWork((long) n * e).split(n, 4, (from, to) -> {
            int r = from;
            if (bf16) {
                for (; r + 4 <= to; r += 4) {
                    long b0 = 2L * e * r, b1 = b0 + 2L * e, b2 = b1 + 2L * e, b3 = b2 + 2L * e;
                    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    for (int i = 0; i < e; i++) {
                        double xi = xd[i];
                        a0 = a0 + (double) Fp.bf16(seg.get(Matrix.BF16, b0 + 2L * i)) * xi;
                        a1 = a1 + (double) Fp.bf16(seg.get(Matrix.BF16, b1 + 2L * i)) * xi;
                        a2 = a2 + (double) Fp.bf16(seg.get(Matrix.BF16, b2 + 2L * i)) * xi;
                        a3 = a3 + (double) Fp.bf16(seg.get(Matrix.BF16, b3 + 2L * i)) * xi;
                    }
                    logits[r] = a0;
                    logits[r + 1] = a1;
                    logits[r + 2] = a2;
                    logits[r + 3] = a3;
                }
            }
            for (; r < to; r++) {
                double acc = 0.0;
                for (int i = 0; i < e; i++) acc = acc + (double) wg.get(r, i) * xd[i];
                logits[r] = acc;
            }
        });
    }

    /**
     * Routes {@code tokens} tokens: x [T][E], Wg [N][E], bias [N] (null = 0). Writes idx [T][K] in selection
     * order and weights [T][K].
     */
    public static void route(Workers workers, boolean fast, int[] idx, float[] weights, float[] x, int tokens, Matrix wg,
            float[] bias, int topK, boolean renormalize, float scaling) {
        route(workers, fast, idx, weights, x, tokens, wg, bias, topK, renormalize, scaling, null);
    }

    /**
     * {@code forced} non-null ([T][K], selection order): the selection is taken from it instead of the top-K, and
     * the weights are computed for it exactly as for a selection of the router's own (the conformance harness runs
     * the rest of a layer with the reference's routing after a near-tie).
     */
    public static void route(Workers workers, boolean fast, int[] idx, float[] weights, float[] x, int tokens, Matrix wg,
            float[] bias, int topK, boolean renormalize, float scaling, int[] forced) {
        int n = wg.rows(), e = wg.cols();
        if (forced != null && forced.length != tokens * topK) throw new IllegalArgumentException("forced routing has " + forced.length + " slots, " + tokens + " x " + topK + " expected");
        if (bias != null && bias.length != n) throw new IllegalArgumentException("router bias has " + bias.length + " entries, " + n + " experts");
        double[] logits = new double[n];
        float[] score = new float[n], choice = new float[n];
        for (int t = 0; t < tokens; t++) {
            if (fast && KernelPath.vector((long) wg.rows() * wg.cols())) logitsFast(workers, logits, x, t * e, wg);
            else if (fast) logitsScalar(logits, x, t * e, wg);
            else logitsReference(logits, x, t * e, wg);
            for (int r = 0; r < n; r++) {
                score[r] = sigmoid(logits[r]);
                choice[r] = score[r] + (bias == null ? 0.0f : bias[r]);
            }
            for (int j = 0; j < topK; j++) {
                if (forced != null) {
                    int pick = forced[t * topK + j];
                    if (pick < 0 || pick >= n) throw new IllegalArgumentException("forced expert " + pick + " is outside 0.." + (n - 1));
                    idx[t * topK + j] = pick;
                    weights[t * topK + j] = score[pick];
                    continue;
                }
                float best = Float.NEGATIVE_INFINITY;
                int pick = -1;
                for (int r = 0; r < n; r++) {
                    if (choice[r] > best) {
                        best = choice[r];
                        pick = r;
                    }
                }
                if (pick < 0) {
                    idx[t * topK + j] = 0;
                    weights[t * topK + j] = 0.0f;
                } else {
                    idx[t * topK + j] = pick;
                    weights[t * topK + j] = score[pick];
                    choice[pick] = Float.NEGATIVE_INFINITY;
                }
            }
            if (renormalize && topK > 1) {
                double s = 0.0;
                for (int j = 0; j < topK; j++) s = s + (double) weights[t * topK + j];
                double z = s + 1e-20;
                for (int j = 0; j < topK; j++) weights[t * topK + j] = (float) (((double) weights[t * topK + j] / z) * (double) scaling);
            } else {
                for (int j = 0; j < topK; j++) weights[t * topK + j] = weights[t * topK + j] * scaling;
            }
        }
    }

    /** The router's score: the sigmoid in double of the double logit, rounded to float once. */
    static float sigmoid(double logit) {
        return (float) (1.0 / (1.0 + StrictMath.exp(-logit)));
    }
}
