package k3j.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Attention-residual aggregation (docs/semantics.md §3.15, §4.1): fold = norm_w · proj_w (float); per source s:
 * inv as RMSNorm's, score_s = (float) Σ_i (double)((float)(v[i]·inv)) · (double)fold[i] (one sequential
 * chain, the normalised value rounded to float BEFORE widening); softmax over sources (m float max,
 * e_s = exp(score_s − m) float, Z = Σ (double) e_s in order, p_s = (float)((double)e_s / Z));
 * out[i] = Σ_s p_s · src_s[i] in float from 0, sources in order, over the RAW sources.
 */
public final class AttnRes {
    private AttnRes() {}

    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;

    /** fold[i] = normW[i] · projW[i], float. */
    public static float[] fold(float[] normW, float[] projW) {
        float[] f = new float[normW.length];
        for (int i = 0; i < f.length; i++) f[i] = normW[i] * projW[i];
        return f;
    }

    /** The source probabilities for one token: sources[s] at offset srcOff[s], each n long. */
    static float[] probabilities(float[][] src, int[] srcOff, float[] fold, int n, float eps) {
        int ns = src.length;
        float[] score = new float[ns];
        for (int s = 0; s < ns; s++) {
            float inv = Norms.rmsInverse(src[s], srcOff[s], n, eps);
            double acc = 0.0;
            for (int i = 0; i < n; i++) acc = acc + (double) (src[s][srcOff[s] + i] * inv) * (double) fold[i];
            score[s] = (float) acc;
        }
        float m = Float.NEGATIVE_INFINITY;
        for (float sc : score) if (sc > m) m = sc;
        float[] e = new float[ns];
        double z = 0.0;
        for (int s = 0; s < ns; s++) {
            e[s] = Fp.exp(score[s] - m);
            z = z + (double) e[s];
        }
        float[] p = new float[ns];
        for (int s = 0; s < ns; s++) p[s] = (float) ((double) e[s] / z);
        return p;
    }

    /**
     * Mixes, per token t, the sources src[s][t·n ..] into out[t·n ..]. Reference path: scalar output sum.
     */
    public static void mixReference(float[] out, float[][] src, int tokens, int n, float[] fold, float eps) {
        int[] off = new int[src.length];
        for (int t = 0; t < tokens; t++) {
            java.util.Arrays.fill(off, t * n);
            float[] p = probabilities(src, off, fold, n, eps);
            for (int i = 0; i < n; i++) {
                float acc = 0.0f;
                for (int s = 0; s < src.length; s++) acc = acc + p[s] * src[s][t * n + i];
                out[t * n + i] = acc;
            }
        }
    }

    /** Fast mix: the output sum vectorised along i (same per-element order), bit-identical. */
    public static void mix(float[] out, float[][] src, int tokens, int n, float[] fold, float eps) {
        if (!KernelPath.vector((long) tokens * n * src.length)) {
            mixReference(out, src, tokens, n, fold, eps);
            return;
        }
        int[] off = new int[src.length];
        for (int t = 0; t < tokens; t++) {
            java.util.Arrays.fill(off, t * n);
            float[] p = probabilities(src, off, fold, n, eps);
            int base = t * n, i = 0;
            for (; i + 8 <= n; i += 8) {
                FloatVector acc = FloatVector.zero(F);
                for (int s = 0; s < src.length; s++) acc = acc.add(FloatVector.fromArray(F, src[s], base + i).mul(p[s]));
                acc.intoArray(out, base + i);
            }
            for (; i < n; i++) {
                float acc = 0.0f;
                for (int s = 0; s < src.length; s++) acc = acc + p[s] * src[s][base + i];
                out[base + i] = acc;
            }
        }
    }
}
