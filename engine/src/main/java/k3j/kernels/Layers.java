package k3j.kernels;

import java.lang.foreign.MemorySegment;

/**
 * Token mixers and MLPs composed from the primitives (docs/semantics.md §3.13, §3.14, §3.17, §3.18 with the
 * departures of §12), for the kernel fixtures of kind kda_layer / mla_layer / dense_mlp. The decoder
 * layer (AttnRes mixes, snapshots, norms around the mixers) is the forward's job. Every step names its
 * primitive; {@code fast} selects the fast or the reference path of each primitive, with the same bits.
 */
public final class Layers {
    private Layers() {}

    /** The LoRA norms of MLA use the class default eps 1e-6, NOT rms_norm_eps (docs/semantics.md §3.14, §12.1). */
    public static final float MLA_LORA_EPS = 1e-6f;

    static void matmul(Workers w, boolean fast, float[] y, float[] x, int tokens, Matrix m) {
        if (fast) MatVec.matmul(w, y, x, tokens, m);
        else MatVec.reference(y, x, tokens, m);
    }

    /** ys[i] = ms[i] x for matrices that read the same x: one pass and one hand-off on the fast path ({@link MatVec#matmulAll}). */
    static void matmulAll(Workers w, boolean fast, float[] x, int tokens, Matrix[] ms, float[][] ys) {
        if (fast) MatVec.matmulAll(w, x, tokens, ms, ys);
        else for (int i = 0; i < ms.length; i++) MatVec.reference(ys[i], x, tokens, ms[i]);
    }

    static void rmsnorm(boolean fast, float[] y, float[] x, float[] w, int rows, int n, float eps) {
        if (fast) Norms.rmsnorm(y, x, w, rows, n, eps);
        else Norms.rmsnormReference(y, x, w, rows, n, eps);
    }

    /** Widens a whole bf16 / f32 vector (a norm gain, conv taps) to float once. */
    public static float[] widen(Matrix m) {
        float[] f = new float[m.rows() * m.cols()];
        for (int r = 0; r < m.rows(); r++) m.row(r, f, r * m.cols());
        return f;
    }

    // ------------------------------------------------------------------ dense SiTU MLP (§3.18)

    public record MlpWeights(Matrix gate, Matrix up, Matrix down, float beta, float linearBeta) {}

    /** y [T][E] = down · SiTU(gate · x, up · x). */
    public static void mlp(Workers w, boolean fast, float[] y, float[] x, int tokens, MlpWeights m) {
        int inter = m.gate().rows();
        float[] g = new float[tokens * inter], u = new float[tokens * inter];
        matmulAll(w, fast, x, tokens, new Matrix[] {m.gate(), m.up()}, new float[][] {g, u});
        mlpDown(w, fast, y, g, u, tokens, m);
    }

    /** y [T][E] = down · SiTU(g, u), from the gate and up projections g, u [T][I] already taken. */
    public static void mlpDown(Workers w, boolean fast, float[] y, float[] g, float[] u, int tokens, MlpWeights m) {
        int inter = m.gate().rows();
        float[] act = new float[tokens * inter];
        Activations.situGlu(act, g, u, tokens * inter, m.beta(), m.linearBeta());
        matmul(w, fast, y, act, tokens, m.down());
    }

    // ------------------------------------------------------------------ KDA layer (§3.13)

    /** conv taps [P][k] widened to float; aLog is the checkpoint's padded tensor (first {@code heads} used). */
    public record KdaWeights(Matrix q, Matrix k, Matrix v, Matrix b, Matrix fa, Matrix fb, Matrix g, Matrix o,
            float[] qConv, float[] kConv, float[] vConv, float[] aLog, float[] dtBias, float[] oNorm,
            int heads, int headDim, int convKernel, float lowerBound, float rmsEps) {}

    /** Recurrent state [H][D][D] then the three conv histories [P][k − 1]; updated in place. */
    public record KdaState(float[] recurrent, float[] qConv, float[] kConv, float[] vConv) {}

    public static void kda(Workers w, boolean fast, float[] out, float[] x, int tokens, KdaWeights l, KdaState st) {
        int h = l.heads(), d = l.headDim(), p = h * d;
        float[] q = new float[tokens * p], k = new float[tokens * p], v = new float[tokens * p];
        float[] b = new float[tokens * h], fa = new float[tokens * d], z = new float[tokens * p];
        // 1. projections: every one that reads x (the output gate's too, used in step 8) in one pass
        float[] gate = new float[tokens * p];
        matmulAll(w, fast, x, tokens, new Matrix[] {l.q(), l.k(), l.v(), l.b(), l.fa(), l.g()}, new float[][] {q, k, v, b, fa, gate});
        matmul(w, fast, z, fa, tokens, l.fb());
        // 2. short conv (+SiLU) on q, k, v, carrying state
        Activations.shortConv(q, q, l.qConv(), st.qConv(), p, l.convKernel(), tokens);
        Activations.shortConv(k, k, l.kConv(), st.kConv(), p, l.convKernel(), tokens);
        Activations.shortConv(v, v, l.vConv(), st.vConv(), p, l.convKernel(), tokens);
        // 3. L2 norm per token per head on q and k only
        if (fast) {
            Norms.l2norm(q, q, tokens * h, d);
            Norms.l2norm(k, k, tokens * h, d);
        } else {
            Norms.l2normReference(q, q, tokens * h, d);
            Norms.l2normReference(k, k, tokens * h, d);
        }
        // 4. beta = sigmoid(b)
        for (int i = 0; i < b.length; i++) b[i] = Fp.sigmoid(b[i]);
        // 5. safe gate: z -> g in place (log-decay; alpha = exp(g) inside the recurrence)
        Activations.kdaGate(z, z, l.aLog(), l.dtBias(), h, d, l.lowerBound(), tokens);
        // 6. recurrence (q scaled by D^-0.5 inside), output from the updated state
        float[] o = new float[tokens * p];
        Kda.recurrence(w, fast, st.recurrent(), o, q, k, v, z, b, tokens, h, d);
        // 7. per-head RMSNorm with the shared D-long gain, THEN 8. the sigmoid output gate
        rmsnorm(fast, o, o, l.oNorm(), tokens * h, d, l.rmsEps());
        for (int i = 0; i < o.length; i++) o[i] = o[i] * Fp.sigmoid(gate[i]);
        // 9. output projection
        matmul(w, fast, out, o, tokens, l.o());
    }

    // ------------------------------------------------------------------ gated MLA (§3.14)

    /** g may be null (no output gate). */
    public record MlaWeights(Matrix qa, float[] qaNorm, Matrix qb, Matrix kva, float[] kvaNorm, Matrix kvb, Matrix g, Matrix o,
            int heads, int nope, int rope, int value) {}

    /** T tokens at positions cached .. cached+T−1 (causal; all K/V of the call are written before attending). */
    public static void mla(Workers w, boolean fast, float[] out, float[] x, int tokens, MlaWeights l, MlaKv cache, int cached) {
        int h = l.heads(), qh = l.nope() + l.rope(), kvLora = l.kvaNorm().length, kvw = l.kva().rows();
        int qLora = l.qa().rows(), kvd = l.nope() + l.value();
        if (kvw != kvLora + l.rope()) throw new IllegalArgumentException("kv_a_proj_with_mqa has " + kvw + " rows, kv_lora + rope = " + (kvLora + l.rope()));
        if (cached + tokens > cache.capacity()) throw new IllegalArgumentException("MLA KV cache position " + (cached + tokens - 1) + " exceeds the limit " + cache.capacity());
        // the down-projections (and the output gate of step 8) read x: one pass
        float[] ql = new float[tokens * qLora], q = new float[tokens * h * qh];
        float[] ct = new float[tokens * kvw], c = new float[tokens * kvLora], kv = new float[tokens * h * kvd];
        float[] gate = l.g() == null ? null : new float[tokens * h * l.value()];
        if (gate == null) matmulAll(w, fast, x, tokens, new Matrix[] {l.qa(), l.kva()}, new float[][] {ql, ct});
        else matmulAll(w, fast, x, tokens, new Matrix[] {l.qa(), l.kva(), l.g()}, new float[][] {ql, ct, gate});
        // 1. q = q_b · RMSNorm_1e-6(q_a · x)
        rmsnorm(fast, ql, ql, l.qaNorm(), tokens, qLora, MLA_LORA_EPS);
        matmul(w, fast, q, ql, tokens, l.qb());
        // 2. ct = kv_a · x; RMSNorm_1e-6 on the first kv_lora entries only
        for (int t = 0; t < tokens; t++) System.arraycopy(ct, t * kvw, c, t * kvLora, kvLora);
        rmsnorm(fast, c, c, l.kvaNorm(), tokens, kvLora, MLA_LORA_EPS);
        // 3./4. the shared rope key and kv_b · c into the cache
        matmul(w, fast, kv, c, tokens, l.kvb());
        for (int t = 0; t < tokens; t++) cache.put(cached + t, kv, t * h * kvd, ct, t * kvw + kvLora);
        // 5.-7. attention per token over positions 0..p
        float scale = MlaAttention.scale(l.nope(), l.rope());
        float[] o = new float[tokens * h * l.value()];
        for (int t = 0; t < tokens; t++) MlaAttention.attend(w, fast, o, t * h * l.value(), q, t * h * qh, cache, cached + t, scale);
        // 8. output gate BEFORE o_proj, no norm
        if (gate != null) {
            for (int i = 0; i < o.length; i++) o[i] = o[i] * Fp.sigmoid(gate[i]);
        }
        // 9.
        matmul(w, fast, out, o, tokens, l.o());
    }

    // ------------------------------------------------------------------ Stable LatentMoE experts (§3.17)
    // The LatentMoE itself is k3j.model.Forward#moe, whose routed experts come from an ExpertSource.

    /** w1 = gate, w3 = up (latent → inter), w2 = down (inter → latent). */
    public record Expert(Mxfp4.Repacked w1, Mxfp4.Repacked w3, Mxfp4.Repacked w2) {}
}
