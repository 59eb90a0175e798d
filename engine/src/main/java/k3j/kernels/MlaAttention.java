package k3j.kernels;

import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The MLA attention core over a KV cache (docs/semantics.md §3.14 steps 5-7) for one query position p (causal: keys
 * 0..p inclusive), every head:
 * 5. d_s = Σ_{i<nope} (double)q[h][i]·(double)key[s][h][i], the SAME double chain continued over the rope
 *    part with the shared rope key; sc_s = (float) d_s · scale (float multiply).
 * 6. m = max_s sc_s (float, from −∞, strict &gt;); e_s = exp(sc_s − m) (float); Z = Σ_s (double) e_s in order.
 * 7. o[j] = Σ_s pr_s · value[s][h][j] in float from 0, s outer, pr_s = (float)((double) e_s / Z).
 * scale = 1.0f / sqrtf((float)(nope + rope)) (192^−0.5 for K3, not 128^−0.5).
 *
 * <p>Fast path: lanes = 16 positions (four DoubleVectors), each lane one position's chain in its own order;
 * step 7 vectorised along j. Parallel over heads.
 */
public final class MlaAttention {
    private MlaAttention() {}

    static final VectorSpecies<Double> D = DoubleVector.SPECIES_256;
    static final VectorSpecies<Float> F128 = FloatVector.SPECIES_128;
    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;

    public static float scale(int nope, int rope) {
        return 1.0f / (float) Math.sqrt((float) (nope + rope));
    }

    /** out [heads][value] for query q [heads][nope + rope] at position p (keys 0..p). */
    public static void attend(Workers workers, boolean fast, float[] out, int outOff, float[] q, int qOff, MlaKv kv, int p, float scale) {
        if (p < 0 || p >= kv.capacity) throw new IllegalArgumentException("MLA KV cache position " + p + " exceeds the limit " + kv.capacity);
        long work = (long) kv.heads * (p + 1) * (kv.nope + kv.rope + kv.value);
        boolean vec = fast && KernelPath.vector(work);
        workers.forWork(work).split(kv.heads, 1, (from, to) -> {
            float[] sc = new float[p + 1 + MlaKv.BLOCK];
            for (int h = from; h < to; h++) {
                if (vec) scoresFast(sc, q, qOff, kv, h, p, scale);
                else scoresReference(sc, q, qOff, kv, h, p, scale);
                softmaxAndValues(vec, out, outOff, sc, kv, h, p);
            }
        });
    }

    static void scoresReference(float[] sc, float[] q, int qOff, MlaKv kv, int h, int p, float scale) {
        int qh = kv.nope + kv.rope, qb = qOff + h * qh;
        for (int s = 0; s <= p; s++) {
            double d = 0.0;
            for (int i = 0; i < kv.nope; i++) d = d + (double) q[qb + i] * (double) kv.key(h, s, i);
            for (int i = 0; i < kv.rope; i++) d = d + (double) q[qb + kv.nope + i] * (double) kv.ropeKey(s, i);
            sc[s] = (float) d * scale;
        }
    }

    static void scoresFast(float[] sc, float[] q, int qOff, MlaKv kv, int h, int p, float scale) {
        final int nope = kv.nope, rope = kv.rope, qh = nope + rope, qb = qOff + h * qh, nb = kv.capacity / MlaKv.BLOCK;
        final float[] keys = kv.keys, rk = kv.ropeKeys;
        double[] qd = new double[qh];
        for (int i = 0; i < qh; i++) qd[i] = q[qb + i];
        double[] lanes = new double[MlaKv.BLOCK];
        for (int blk = 0; blk * MlaKv.BLOCK <= p; blk++) {
            DoubleVector a0 = DoubleVector.zero(D), a1 = a0, a2 = a0, a3 = a0;
            int kb = (h * nb + blk) * nope * MlaKv.BLOCK;
            for (int i = 0; i < nope; i++) {
                int o = kb + i * MlaKv.BLOCK;
                double qi = qd[i];
                a0 = a0.add(((DoubleVector) FloatVector.fromArray(F128, keys, o).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a1 = a1.add(((DoubleVector) FloatVector.fromArray(F128, keys, o + 4).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a2 = a2.add(((DoubleVector) FloatVector.fromArray(F128, keys, o + 8).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a3 = a3.add(((DoubleVector) FloatVector.fromArray(F128, keys, o + 12).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
            }
            int rb = blk * rope * MlaKv.BLOCK;
            for (int i = 0; i < rope; i++) {
                int o = rb + i * MlaKv.BLOCK;
                double qi = qd[nope + i];
                a0 = a0.add(((DoubleVector) FloatVector.fromArray(F128, rk, o).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a1 = a1.add(((DoubleVector) FloatVector.fromArray(F128, rk, o + 4).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a2 = a2.add(((DoubleVector) FloatVector.fromArray(F128, rk, o + 8).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
                a3 = a3.add(((DoubleVector) FloatVector.fromArray(F128, rk, o + 12).convertShape(VectorOperators.F2D, D, 0)).mul(qi));
            }
            a0.intoArray(lanes, 0);
            a1.intoArray(lanes, 4);
            a2.intoArray(lanes, 8);
            a3.intoArray(lanes, 12);
            int s0 = blk * MlaKv.BLOCK;
            for (int l = 0; l < MlaKv.BLOCK && s0 + l <= p; l++) sc[s0 + l] = (float) lanes[l] * scale;
        }
    }

    /** Steps 6 and 7 for head h (sc holds sc_0..sc_p; overwritten by e_s). */
    static void softmaxAndValues(boolean fast, float[] out, int outOff, float[] sc, MlaKv kv, int h, int p) {
        float m = Float.NEGATIVE_INFINITY;
        for (int s = 0; s <= p; s++) if (sc[s] > m) m = sc[s];
        double z = 0.0;
        for (int s = 0; s <= p; s++) {
            sc[s] = Fp.exp(sc[s] - m);
            z = z + (double) sc[s];
        }
        int vh = kv.value, ob = outOff + h * vh;
        java.util.Arrays.fill(out, ob, ob + vh, 0.0f);
        if (!fast) {
            for (int s = 0; s <= p; s++) {
                float pr = (float) ((double) sc[s] / z);
                for (int j = 0; j < vh; j++) out[ob + j] = out[ob + j] + pr * kv.value(h, s, j);
            }
            return;
        }
        final float[] vals = kv.values;
        final int vec = vh & ~7;
        for (int s = 0; s <= p; s++) {
            float pr = (float) ((double) sc[s] / z);
            int vb = (h * kv.capacity + s) * vh;
            int j = 0;
            for (; j < vec; j += 8) {
                FloatVector.fromArray(F, out, ob + j).add(FloatVector.fromArray(F, vals, vb + j).mul(pr)).intoArray(out, ob + j);
            }
            for (; j < vh; j++) out[ob + j] = out[ob + j] + pr * vals[vb + j];
        }
    }
}
