package k3j.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * The Kimi Delta Attention recurrence (docs/semantics.md §3.12), float arithmetic throughout.
 * State S [dk][dv] row-major per head (S[k][v]). One step, in this order:
 * decay S[i][·] ·= alpha[i]; u[j] = Σ_i k[i]·S[i][j] over i with k[i] ≠ 0 (i outer, j inner);
 * S[i][j] += (k[i]·beta)·(v[j] − u[j]) for k[i] ≠ 0; o[j] = Σ_i q[i]·S[i][j] over q[i] ≠ 0 from the
 * UPDATED state.
 *
 * <p>Fast path: two fused passes (decay row i then u += k_i·row_i; update row i then o += q_i·row_i), the
 * same operations in the same order per element, vectorised along j with FloatVector256. Never FMA: the
 * float products are not exact, a fused multiply-add changes the bits.
 */
public final class Kda {
    private Kda() {}

    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;

    /** Reference step for one head: S at sOff [d][d]; q (already scaled), k, v, alpha at their offsets [d]; o [d]. */
    public static void stepReference(float[] S, int sOff, float[] o, int oOff, float[] q, int qOff, float[] k, int kOff,
            float[] v, int vOff, float[] alpha, int aOff, float beta, int d) {
        for (int i = 0; i < d; i++) {
            float a = alpha[aOff + i];
            for (int j = 0; j < d; j++) S[sOff + i * d + j] = S[sOff + i * d + j] * a;
        }
        float[] u = new float[d];
        for (int i = 0; i < d; i++) {
            float ki = k[kOff + i];
            if (ki == 0.0f) continue;
            for (int j = 0; j < d; j++) u[j] = u[j] + ki * S[sOff + i * d + j];
        }
        for (int i = 0; i < d; i++) {
            float ki = k[kOff + i];
            if (ki == 0.0f) continue;
            for (int j = 0; j < d; j++) S[sOff + i * d + j] = S[sOff + i * d + j] + ((ki * beta) * (v[vOff + j] - u[j]));
        }
        for (int j = 0; j < d; j++) o[oOff + j] = 0.0f;
        for (int i = 0; i < d; i++) {
            float qi = q[qOff + i];
            if (qi == 0.0f) continue;
            for (int j = 0; j < d; j++) o[oOff + j] = o[oOff + j] + qi * S[sOff + i * d + j];
        }
    }

    /** Fast step, bit-identical to {@link #stepReference}; u and dv are scratch of length >= d. */
    public static void step(float[] S, int sOff, float[] o, int oOff, float[] q, int qOff, float[] k, int kOff,
            float[] v, int vOff, float[] alpha, int aOff, float beta, int d, float[] u, float[] dv) {
        int vec = d & ~7;
        java.util.Arrays.fill(u, 0, d, 0.0f);
        for (int i = 0; i < d; i++) {
            int row = sOff + i * d;
            float a = alpha[aOff + i], ki = k[kOff + i];
            if (ki != 0.0f) {
                int j = 0;
                for (; j < vec; j += 8) {
                    FloatVector s = FloatVector.fromArray(F, S, row + j).mul(a);
                    s.intoArray(S, row + j);
                    FloatVector.fromArray(F, u, j).add(s.mul(ki)).intoArray(u, j);
                }
                for (; j < d; j++) {
                    float s = S[row + j] * a;
                    S[row + j] = s;
                    u[j] = u[j] + ki * s;
                }
            } else {
                int j = 0;
                for (; j < vec; j += 8) FloatVector.fromArray(F, S, row + j).mul(a).intoArray(S, row + j);
                for (; j < d; j++) S[row + j] = S[row + j] * a;
            }
        }
        for (int j = 0; j < d; j++) {
            dv[j] = v[vOff + j] - u[j];
            o[oOff + j] = 0.0f;
        }
        for (int i = 0; i < d; i++) {
            int row = sOff + i * d;
            float ki = k[kOff + i], qi = q[qOff + i];
            if (ki != 0.0f) {
                float kb = ki * beta;
                if (qi != 0.0f) {
                    int j = 0;
                    for (; j < vec; j += 8) {
                        FloatVector s = FloatVector.fromArray(F, S, row + j).add(FloatVector.fromArray(F, dv, j).mul(kb));
                        s.intoArray(S, row + j);
                        FloatVector.fromArray(F, o, oOff + j).add(s.mul(qi)).intoArray(o, oOff + j);
                    }
                    for (; j < d; j++) {
                        float s = S[row + j] + kb * dv[j];
                        S[row + j] = s;
                        o[oOff + j] = o[oOff + j] + qi * s;
                    }
                } else {
                    int j = 0;
                    for (; j < vec; j += 8) FloatVector.fromArray(F, S, row + j).add(FloatVector.fromArray(F, dv, j).mul(kb)).intoArray(S, row + j);
                    for (; j < d; j++) S[row + j] = S[row + j] + kb * dv[j];
                }
            } else if (qi != 0.0f) {
                int j = 0;
                for (; j < vec; j += 8) FloatVector.fromArray(F, o, oOff + j).add(FloatVector.fromArray(F, S, row + j).mul(qi)).intoArray(o, oOff + j);
                for (; j < d; j++) o[oOff + j] = o[oOff + j] + qi * S[row + j];
            }
        }
    }

    /**
     * One step for every head (parallel over heads): S [H][D][D], q (already scaled), k, v, alpha, o [H][D],
     * beta [H]. The C peer's kda_all_heads, for benchmarks and the forward's decode.
     */
    public static void stepAllHeads(Workers workers, boolean fast, float[] state, float[] o, float[] q, float[] k, float[] v,
            float[] alpha, float[] beta, int heads, int d) {
        boolean vec = fast && KernelPath.vector(3L * heads * d * d);
        workers.forWork(3L * heads * d * d).split(heads, 1, (from, to) -> {
            float[] u = new float[d], dv = new float[d];
            for (int h = from; h < to; h++) {
                if (vec) step(state, h * d * d, o, h * d, q, h * d, k, h * d, v, h * d, alpha, h * d, beta[h], d, u, dv);
                else stepReference(state, h * d * d, o, h * d, q, h * d, k, h * d, v, h * d, alpha, h * d, beta[h], d);
            }
        });
    }

    /** q scale = 1.0f / sqrtf((float) D), float (the sqrt correctly rounded, so (float)Math.sqrt is exact sqrtf). */
    public static float queryScale(int headDim) {
        return 1.0f / (float) Math.sqrt((float) headDim);
    }

    /**
     * The recurrence over T tokens and all heads (parallel over heads; tokens in order within a head).
     * q, k, v, g [T][H][D] (q not yet scaled, q and k already L2-normed; g the log-decay, alpha = exp(g)),
     * beta [T][H], state [H][D][D] updated in place, o [T][H][D].
     */
    public static void recurrence(Workers workers, boolean fast, float[] state, float[] o, float[] q, float[] k, float[] v,
            float[] g, float[] beta, int tokens, int heads, int d) {
        float qscale = queryScale(d);
        int p = heads * d;
        boolean vec = fast && KernelPath.vector(3L * tokens * heads * d * d);
        workers.forWork(3L * tokens * heads * d * d).split(heads, 1, (from, to) -> {
            float[] qs = new float[d], alpha = new float[d], u = new float[d], dv = new float[d];
            for (int h = from; h < to; h++) {
                for (int t = 0; t < tokens; t++) {
                    int off = t * p + h * d;
                    for (int i = 0; i < d; i++) {
                        qs[i] = q[off + i] * qscale;
                        alpha[i] = Fp.exp(g[off + i]);
                    }
                    float b = beta[t * heads + h];
                    if (vec) step(state, h * d * d, o, off, qs, 0, k, off, v, off, alpha, 0, b, d, u, dv);
                    else stepReference(state, h * d * d, o, off, qs, 0, k, off, v, off, alpha, 0, b, d);
                }
            }
        });
    }
}
