package k3j.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import k3j.config.ModelConfig;
import k3j.kernels.AttnRes;
import k3j.kernels.Embedding;
import k3j.kernels.Layers;
import k3j.kernels.MatVec;
import k3j.kernels.Matrix;
import k3j.kernels.Norms;
import k3j.kernels.Workers;

/**
 * One step over several sequences (continuous batching, docs/semantics.md §4.7): each sequence feeds a prefill chunk
 * or one decode token at its own state's positions. Each decoder layer is acquired once per step and its dense
 * kernels run once over all the step's tokens; the token mixers run per sequence on its own state
 * ({@link BatchMixers}); the routed experts are grouped by the tokens routed to them ({@link Forward#moe}), each
 * token's sum over its experts in its own top-K order; the AttnRes mixes and the norms are per token. So a sequence's
 * logits are the bits of {@link Forward#step} over the same ids and state, whatever runs beside it
 * (docs/fp-contract.md §8).
 */
public final class BatchStep {
    /**
     * One sequence's part of a step.
     *
     * @param ids          the ids fed, at positions state.cached() ..
     * @param state        the sequence's own state, advanced by the step
     * @param allPositions whether every position's logits are returned (else the last one's)
     */
    public record Feed(int[] ids, DecodeState state, boolean allPositions) {
        /** Checks the feed is not empty and has a state. */
        public Feed {
            if (ids == null || ids.length == 0) throw new IllegalArgumentException("a feed needs at least one id");
            if (state == null) throw new IllegalArgumentException("a feed needs its sequence's state");
        }
    }

    /** A planted fault, for the batch-invariance gate's mutants only. */
    enum Fault {
        /** none: the step */
        NONE,
        /** the final norm's mean square taken over every row of the step: a reduction across the batch */
        BATCH_NORM
    }

    private final Forward forward;
    private final ModelConfig c;
    private final Fault fault;
    private volatile long lastBytes;

    /**
     * Steps over {@code forward}'s weights, experts and workers.
     *
     * @param forward the forward whose weights, experts and workers the step uses
     */
    public BatchStep(Forward forward) {
        this(forward, Fault.NONE);
    }

    BatchStep(Forward forward, Fault fault) {
        this.forward = forward;
        this.c = forward.weights().config();
        this.fault = fault;
    }

    /** {@return the bytes of weights the last step read: each matrix and each routed expert once per read} */
    public long lastStepBytes() {
        return lastBytes;
    }

    /** {@return the logits' width} */
    public int vocab() {
        return forward.weights().lmHead().rows();
    }

    /**
     * A fresh state for one sequence.
     *
     * @param capacity its positions
     * @return the state
     */
    public DecodeState newState(int capacity) {
        return forward.newState(capacity);
    }

    /**
     * Runs one step.
     *
     * @param feeds the step's sequences, each with its own state (no state twice)
     * @return per feed, its logits: [ids.length][V] when it asked for every position, else [1][V]
     */
    public float[][] run(List<Feed> feeds) {
        int n = feeds.size(), e = c.hiddenSize(), layers = forward.layerCount();
        if (n == 0) throw new IllegalArgumentException("a step needs at least one sequence");
        int[] off = new int[n + 1];
        Map<DecodeState, Boolean> seen = new IdentityHashMap<>();
        for (int i = 0; i < n; i++) {
            Feed f = feeds.get(i);
            DecodeState st = f.state();
            if (seen.put(st, true) != null) throw new IllegalArgumentException("one state fed twice in a step");
            if (st.layers() != layers) throw new IllegalArgumentException("a state of " + st.layers() + " layers for a forward of " + layers);
            if (st.cached + f.ids().length > st.capacity) {
                throw new ForwardException("MLA KV cache position " + (st.cached + f.ids().length - 1) + " exceeds the limit " + (st.capacity - 1)
                        + " (capacity " + st.capacity + " positions)");
            }
            off[i + 1] = off[i] + f.ids().length;
        }
        int t = off[n];
        long bytes = 0;
        StreamedTables tables = forward.tables();
        Matrix embed = forward.weights().embed(), head = forward.weights().lmHead();
        float[] h = new float[t * e];
        for (int i = 0; i < n; i++) {
            int[] ids = feeds.get(i).ids();
            for (int j = 0; j < ids.length; j++) {
                if (tables != null) tables.embedRow(h, (off[i] + j) * e, ids[j]);
                else Embedding.row(h, (off[i] + j) * e, embed, ids[j]);
            }
        }
        bytes += (long) t * e * embed.type().bytes;
        List<float[]> snaps = new ArrayList<>();
        Workers w = forward.workers();
        for (int l = 0; l < layers; l++) {
            try (LayerSource.Held held = forward.layerSource().acquire(l)) {
                LayerWeights lw = held.weights();
                long[] read = {0};
                h = layer(w, lw, h, snaps, feeds, off, read);
                bytes += read[0];
            }
        }
        for (Feed f : feeds) f.state().cached += f.ids().length;
        float[] mix = new float[t * e];
        AttnRes.mix(mix, sources(snaps, h), t, e, forward.weights().outputResFold(), c.rmsNormEps());
        float[] norm = new float[t * e];
        if (fault == Fault.BATCH_NORM) batchNorm(norm, mix, forward.weights().finalNorm(), t, e, c.rmsNormEps());
        else Norms.rmsnorm(norm, mix, forward.weights().finalNorm(), t, e, c.rmsNormEps());
        int rows = 0;
        for (Feed f : feeds) rows += f.allPositions() ? f.ids().length : 1;
        float[] x = new float[rows * e];
        int r = 0;
        for (int i = 0; i < n; i++) {
            int from = feeds.get(i).allPositions() ? off[i] : off[i + 1] - 1;
            System.arraycopy(norm, from * e, x, r * e, (off[i + 1] - from) * e);
            r += off[i + 1] - from;
        }
        int v = head.rows();
        float[] logits = new float[rows * v];
        if (tables != null) tables.lmHead(w, logits, x, rows);
        else MatVec.matmul(w, logits, x, rows, head);
        bytes += (long) v * head.cols() * head.type().bytes;
        float[][] out = new float[n][];
        r = 0;
        for (int i = 0; i < n; i++) {
            int k = feeds.get(i).allPositions() ? off[i + 1] - off[i] : 1;
            out[i] = Arrays.copyOfRange(logits, r * v, (r + k) * v);
            r += k;
        }
        lastBytes = bytes;
        return out;
    }

    /** One decoder layer over the step's tokens (docs/semantics.md §4.1), as the one-sequence forward runs it. */
    private float[] layer(Workers w, LayerWeights lw, float[] partialIn, List<float[]> snaps, List<Feed> feeds, int[] off, long[] read) {
        int t = off[off.length - 1], e = c.hiddenSize();
        float eps = c.rmsNormEps();
        float[] attnIn;
        if (snaps.isEmpty()) attnIn = partialIn.clone();
        else {
            attnIn = new float[t * e];
            AttnRes.mix(attnIn, sources(snaps, partialIn), t, e, lw.attnResFold(), eps);
        }
        boolean cleared = false;
        if (lw.boundary()) {
            snaps.add(partialIn);
            cleared = true;
        }
        float[] attnNorm = new float[t * e];
        Norms.rmsnorm(attnNorm, attnIn, lw.inputNorm(), t, e, eps);
        float[] attnOut = new float[t * e];
        switch (lw.mixer()) {
            case TokenMixer.Kda k -> {
                BatchMixers.kda(w, attnOut, attnNorm, off, feeds, lw.index(), k.weights());
                Layers.KdaWeights m = k.weights();
                read[0] += bytes(m.q(), m.k(), m.v(), m.b(), m.fa(), m.fb(), m.g(), m.o());
            }
            case TokenMixer.Mla k -> {
                BatchMixers.mla(w, attnOut, attnNorm, off, feeds, lw.index(), k.weights());
                Layers.MlaWeights m = k.weights();
                read[0] += bytes(m.qa(), m.qb(), m.kva(), m.kvb(), m.g(), m.o());
            }
        }
        float[] partialAttn = cleared ? attnOut.clone() : add(partialIn, attnOut);
        float[] mlpIn = new float[t * e];
        AttnRes.mix(mlpIn, sources(snaps, partialAttn), t, e, lw.mlpResFold(), eps);
        float[] mlpNorm = new float[t * e];
        Norms.rmsnorm(mlpNorm, mlpIn, lw.postAttentionNorm(), t, e, eps);
        float[] mlpOut = new float[t * e];
        switch (lw.mlp()) {
            case Mlp.Dense d -> {
                Layers.mlp(w, true, mlpOut, mlpNorm, t, d.weights());
                read[0] += bytes(d.weights());
            }
            case Mlp.LatentMoe m -> {
                int[] idx = new int[t * m.topK()];
                forward.moe(lw.index(), m, mlpOut, idx, new float[t * m.topK()], mlpNorm, t);
                read[0] += bytes(m.gate(), m.down(), m.up()) + bytes(m.shared()) + expertReads(idx, t, m.topK()) * expertBytes(m);
            }
        }
        return add(partialAttn, mlpOut);
    }

    /** The routed experts {@link Forward#moe} reads for these selections: each expert once per sub-chunk of tokens that routes to it. */
    private static long expertReads(int[] idx, int t, int k) {
        long reads = 0;
        for (int c0 = 0; c0 < t; c0 += Forward.MOE_CHUNK) {
            TreeSet<Integer> union = new TreeSet<>();
            for (int i = c0 * k; i < Math.min(t, c0 + Forward.MOE_CHUNK) * k; i++) union.add(idx[i]);
            reads += union.size();
        }
        return reads;
    }

    /** An expert's stored bytes: three MXFP4 matrices of intermediate x latent, a nibble per weight and a scale byte per 32. */
    private static long expertBytes(Mlp.LatentMoe m) {
        long weights = (long) m.intermediate() * m.latent();
        return 3 * (weights / 2 + weights / 32);
    }

    private static long bytes(Layers.MlpWeights m) {
        return bytes(m.gate(), m.up(), m.down());
    }

    private static long bytes(Matrix... ms) {
        long b = 0;
        for (Matrix m : ms) if (m != null) b += (long) m.rows() * m.cols() * m.type().bytes;
        return b;
    }

    /** The planted fault: one mean square over every row of the step, so a row's norm depends on the rows beside it. */
    private static void batchNorm(float[] y, float[] x, float[] g, int rows, int n, float eps) {
        double ss = 0;
        for (int i = 0; i < rows * n; i++) ss += (double) x[i] * x[i];
        float inv = (float) (1.0 / Math.sqrt(ss / ((long) rows * n) + (double) eps));
        for (int r = 0; r < rows; r++) for (int i = 0; i < n; i++) y[r * n + i] = (g[i] * x[r * n + i]) * inv;
    }

    private static float[][] sources(List<float[]> snaps, float[] partial) {
        float[][] src = new float[snaps.size() + 1][];
        for (int i = 0; i < snaps.size(); i++) src[i] = snaps.get(i);
        src[snaps.size()] = partial;
        return src;
    }

    private static float[] add(float[] a, float[] b) {
        float[] y = new float[a.length];
        for (int i = 0; i < y.length; i++) y[i] = a[i] + b[i];
        return y;
    }
}
