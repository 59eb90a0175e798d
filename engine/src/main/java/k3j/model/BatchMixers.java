package k3j.model;

import java.util.Arrays;
import java.util.List;
import k3j.kernels.Activations;
import k3j.kernels.Fp;
import k3j.kernels.Kda;
import k3j.kernels.Layers;
import k3j.kernels.MatVec;
import k3j.kernels.MlaAttention;
import k3j.kernels.MlaKv;
import k3j.kernels.Norms;
import k3j.kernels.Workers;

/**
 * The token mixers over a step's tokens ({@link BatchStep}): every projection is one matmul over all the step's
 * tokens (a batch is T single calls bit for bit, docs/fp-contract.md §2), and everything that carries state (the short
 * convs and the KDA recurrence; the MLA rows and attention) runs per sequence on its own state at its own positions.
 * The operations and their order are {@link Layers#kda} and {@link Layers#mla}'s, one sequence at a time.
 */
final class BatchMixers {
    private BatchMixers() {}

    /** [from, to) token rows of sequence i: off[i] .. off[i + 1]. */
    static void kda(Workers w, float[] out, float[] x, int[] off, List<BatchStep.Feed> feeds, int layer, Layers.KdaWeights l) {
        int t = off[off.length - 1], h = l.heads(), d = l.headDim(), p = h * d;
        float[] q = new float[t * p], k = new float[t * p], v = new float[t * p];
        float[] b = new float[t * h], fa = new float[t * d], z = new float[t * p];
        MatVec.matmul(w, q, x, t, l.q());
        MatVec.matmul(w, k, x, t, l.k());
        MatVec.matmul(w, v, x, t, l.v());
        MatVec.matmul(w, b, x, t, l.b());
        MatVec.matmul(w, fa, x, t, l.fa());
        MatVec.matmul(w, z, fa, t, l.fb());
        for (int i = 0; i < feeds.size(); i++) {
            Layers.KdaState st = feeds.get(i).state().kda[layer];
            int n = off[i + 1] - off[i];
            conv(q, l.qConv(), st.qConv(), off[i], n, p, l.convKernel());
            conv(k, l.kConv(), st.kConv(), off[i], n, p, l.convKernel());
            conv(v, l.vConv(), st.vConv(), off[i], n, p, l.convKernel());
        }
        Norms.l2norm(q, q, t * h, d);
        Norms.l2norm(k, k, t * h, d);
        for (int i = 0; i < b.length; i++) b[i] = Fp.sigmoid(b[i]);
        Activations.kdaGate(z, z, l.aLog(), l.dtBias(), h, d, l.lowerBound(), t);
        float[] o = new float[t * p];
        for (int i = 0; i < feeds.size(); i++) {
            Layers.KdaState st = feeds.get(i).state().kda[layer];
            int a = off[i], n = off[i + 1] - a;
            float[] os = new float[n * p];
            Kda.recurrence(w, true, st.recurrent(), os, slice(q, a, n, p), slice(k, a, n, p), slice(v, a, n, p), slice(z, a, n, p), slice(b, a, n, h), n, h, d);
            System.arraycopy(os, 0, o, a * p, n * p);
        }
        Norms.rmsnorm(o, o, l.oNorm(), t * h, d, l.rmsEps());
        float[] gate = new float[t * p];
        MatVec.matmul(w, gate, x, t, l.g());
        for (int i = 0; i < o.length; i++) o[i] = o[i] * Fp.sigmoid(gate[i]);
        MatVec.matmul(w, out, o, t, l.o());
    }

    private static void conv(float[] y, float[] taps, float[] state, int a, int n, int p, int kernel) {
        float[] s = slice(y, a, n, p);
        Activations.shortConv(s, s, taps, state, p, kernel, n);
        System.arraycopy(s, 0, y, a * p, n * p);
    }

    private static float[] slice(float[] x, int a, int n, int width) {
        return Arrays.copyOfRange(x, a * width, (a + n) * width);
    }

    static void mla(Workers w, float[] out, float[] x, int[] off, List<BatchStep.Feed> feeds, int layer, Layers.MlaWeights l) {
        int t = off[off.length - 1], h = l.heads(), qh = l.nope() + l.rope(), kvLora = l.kvaNorm().length, kvw = l.kva().rows();
        int qLora = l.qa().rows(), kvd = l.nope() + l.value();
        if (kvw != kvLora + l.rope()) throw new IllegalArgumentException("kv_a_proj_with_mqa has " + kvw + " rows, kv_lora + rope = " + (kvLora + l.rope()));
        float[] ql = new float[t * qLora], q = new float[t * h * qh];
        MatVec.matmul(w, ql, x, t, l.qa());
        Norms.rmsnorm(ql, ql, l.qaNorm(), t, qLora, Layers.MLA_LORA_EPS);
        MatVec.matmul(w, q, ql, t, l.qb());
        float[] ct = new float[t * kvw], c = new float[t * kvLora], kv = new float[t * h * kvd];
        MatVec.matmul(w, ct, x, t, l.kva());
        for (int i = 0; i < t; i++) System.arraycopy(ct, i * kvw, c, i * kvLora, kvLora);
        Norms.rmsnorm(c, c, l.kvaNorm(), t, kvLora, Layers.MLA_LORA_EPS);
        MatVec.matmul(w, kv, c, t, l.kvb());
        float scale = MlaAttention.scale(l.nope(), l.rope());
        float[] o = new float[t * h * l.value()];
        for (int i = 0; i < feeds.size(); i++) {
            DecodeState st = feeds.get(i).state();
            MlaKv cache = st.kv[layer];
            int a = off[i], n = off[i + 1] - a, cached = st.cached;
            if (cached + n > cache.capacity()) throw new IllegalArgumentException("MLA KV cache position " + (cached + n - 1) + " exceeds the limit " + cache.capacity());
            for (int j = 0; j < n; j++) cache.put(cached + j, kv, (a + j) * h * kvd, ct, (a + j) * kvw + kvLora);
            for (int j = 0; j < n; j++) MlaAttention.attend(w, true, o, (a + j) * h * l.value(), q, (a + j) * h * qh, cache, cached + j, scale);
        }
        if (l.g() != null) {
            float[] gate = new float[o.length];
            MatVec.matmul(w, gate, x, t, l.g());
            for (int i = 0; i < o.length; i++) o[i] = o[i] * Fp.sigmoid(gate[i]);
        }
        MatVec.matmul(w, out, o, t, l.o());
    }
}
