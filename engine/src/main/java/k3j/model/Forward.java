package k3j.model;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertPart;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.config.ModelConfig;
import k3j.kernels.Activations;
import k3j.kernels.AttnRes;
import k3j.kernels.Embedding;
import k3j.kernels.Layers;
import k3j.kernels.Matrix;
import k3j.kernels.MatVec;
import k3j.kernels.MlaKv;
import k3j.kernels.Mxfp4;
import k3j.kernels.Norms;
import k3j.kernels.Router;
import k3j.kernels.Workers;

/**
 * The forward pass (docs/semantics.md §4): embedding, 93 decoder layers with Attention
 * Residuals, the model-level mix, final norm and LM head. Orchestration only: every number is computed by a
 * k3j.kernels kernel (fast paths, which are bit-identical to the reference paths and to any thread count).
 *
 * <p>Decoder layer, per docs/semantics.md §4.1: mix the incoming partial with the snapshots (only if there are any);
 * on a boundary snapshot the INCOMING partial (not the mix) and clear it; norm, KDA or MLA; partial += out
 * (or = out when cleared); mix again (always); norm, dense MLP or LatentMoE; return partial + mlp. The
 * returned partial, not the mix, feeds the next layer (pitfall: passing the mix on runs and is wrong).
 */
public final class Forward {
    /** Tokens per chunk-union MoE sub-chunk (docs/semantics.md §3.17). */
    static final int MOE_CHUNK = 64;

    /** Receives every layer's stages as the forward computes them. */
    @FunctionalInterface
    public interface StageSink {
        void accept(LayerStages stages);
    }

    /**
     * One forward's output. logits [rows][V]: every position when asked for all, else the last one only
     * (rows = 1). finalMix / finalNorm [tokens][E] are the model-level AttnRes output and its norm.
     */
    public record Result(int tokens, int rows, float[] logits, float[] finalMix, float[] finalNorm) {}

    private final ModelWeights w;
    private final ModelConfig c;
    private final ExpertSource experts;
    private final LayerSource layers;
    private final Workers workers;
    private final boolean memoize;
    private Mxfp4.Codes codes = Mxfp4.Codes.NIBBLES;
    private final Map<Long, Layers.Expert> kernelExperts = new ConcurrentHashMap<>();
    private final AtomicLong drops = new AtomicLong();
    private int layersCompleted;
    private StreamedTables tables;   // null: the embedding and LM head are weights' (resident/mapped)

    /**
     * @param experts where routed experts come from; a source that never evicts ({@link CheckpointExperts})
     *                lets the forward keep each expert's repacked form
     */
    public Forward(ModelWeights weights, ExpertSource experts, Workers workers) {
        this(weights, experts, workers, experts instanceof CheckpointExperts);
    }

    /**
     * @param expertsNeverEvict the source hands out bytes that never change for a (layer, expert), so the
     *                          forward may keep each expert's repacked MXFP4 form instead of repacking per call
     */
    public Forward(ModelWeights weights, ExpertSource experts, Workers workers, boolean expertsNeverEvict) {
        this(weights, LayerSource.resident(weights.config(), weights.layers(), weights.layerTensors()), experts, workers, expertsNeverEvict);
    }

    /**
     * @param layers where each decoder layer's weights come from in walk order: resident, or bound per use from
     *               a streamed trunk ({@link StreamedLayers}); the model-level tables are {@code weights}'
     */
    public Forward(ModelWeights weights, LayerSource layers, ExpertSource experts, Workers workers, boolean expertsNeverEvict) {
        this.w = weights;
        this.c = weights.config();
        this.layers = layers;
        this.experts = experts;
        this.workers = workers;
        this.memoize = expertsNeverEvict;
    }

    public ModelWeights weights() {
        return w;
    }

    /** Where the routed experts come from (resident, the expert cache, or a rewriting view of either). */
    public ExpertSource experts() {
        return experts;
    }

    /**
     * This forward (model tables, streamed or not; decoder layers, the same {@link LayerSource}; expert codes) with
     * the routed experts from {@code source} instead, e.g. a view that rewrites some of them (bisect's candidates).
     */
    public Forward withExperts(ExpertSource source, boolean sourceNeverEvicts) {
        Forward f = new Forward(w, layers, source, workers, sourceNeverEvicts);
        f.tables = tables;
        f.codes = codes;
        return f;
    }

    /**
     * How this forward repacks experts its source holds as stored (a cache source hands them out already repacked):
     * nibble codes (the default) or int8-predecoded. The same bits either way.
     */
    public void expertCodes(Mxfp4.Codes codes) {
        this.codes = codes;
    }

    /** This forward with the embedding rows and the LM head read from {@code tables} (ultra preset); same bits. */
    public Forward streamingTables(StreamedTables tables) {
        Forward f = new Forward(w, layers, experts, workers, memoize);
        f.tables = tables;
        f.codes = codes;
        return f;
    }

    /** Routed experts that failed to load over this forward's life (any drop makes the run INVALID). */
    public long expertDrops() {
        return drops.get();
    }

    /** Decoder layers the forward walks. */
    public int layerCount() {
        return layers.layerCount();
    }

    /** A fresh incremental state for this forward's layers, sized from the config (the layers may be streamed). */
    public DecodeState newState(int capacity) {
        return DecodeState.create(c, layers.layerCount(), capacity);
    }

    /** Where the decoder layers' weights come from (the batched step walks the same). */
    LayerSource layerSource() {
        return layers;
    }

    Workers workers() {
        return workers;
    }

    /** The streamed embedding and LM head, or null: the weights' own. */
    StreamedTables tables() {
        return tables;
    }

    /** Layers finished by the last forward. */
    public int layersCompleted() {
        return layersCompleted;
    }

    // ------------------------------------------------------------------ whole model

    /** Full recompute over {@code ids} from an empty state (docs/semantics.md §4.3 default mode). */
    public Result full(int[] ids, boolean allPositions, StageSink sink) {
        return run(ids, null, false, allPositions, sink);
    }

    /**
     * Full recompute with ONE KDA state slot, cleared before every KDA layer (GATE 1b): valid because a
     * layer's state is dead once the layer has processed the whole sequence. Must give the same bits.
     */
    public Result fullReusingOneStateSlot(int[] ids, boolean allPositions) {
        return run(ids, null, true, allPositions, null);
    }

    /** Incremental: feeds {@code ids} at positions state.cached() .. and advances it (docs/semantics.md §4.3). */
    public Result step(int[] ids, DecodeState state, boolean allPositions, StageSink sink) {
        if (state == null) throw new IllegalArgumentException("incremental step needs a DecodeState");
        return run(ids, state, false, allPositions, sink);
    }

    private Result run(int[] ids, DecodeState state, boolean reuseOneSlot, boolean allPositions, StageSink sink) {
        int t = ids.length, e = c.hiddenSize();
        if (t < 1) throw new IllegalArgumentException("a forward needs at least one token");
        int cached = state == null ? 0 : state.cached;
        if (state != null && cached + t > state.capacity) {
            throw new ForwardException("MLA KV cache position " + (cached + t - 1) + " exceeds the limit " + (state.capacity - 1)
                    + " (capacity " + state.capacity + " positions)");
        }
        layersCompleted = 0;
        float[] h = new float[t * e];
        for (int i = 0; i < t; i++) {
            if (tables != null) tables.embedRow(h, i * e, ids[i]);
            else Embedding.row(h, i * e, w.embed(), ids[i]);
        }
        List<float[]> snaps = new ArrayList<>();
        Layers.KdaState slot = null;
        for (int l = 0; l < layers.layerCount(); l++) {
          try (LayerSource.Held held = layers.acquire(l)) {   // streamed: read, bind; released once the layer is computed
            LayerWeights lw = held.weights();
            Layers.KdaState kda = null;
            MlaKv kv = null;
            switch (lw.mixer()) {
                case TokenMixer.Kda k -> {
                    if (state != null) kda = state.kda[lw.index()];
                    else if (reuseOneSlot) {
                        if (slot == null) slot = DecodeState.newKdaState(k.weights());
                        DecodeState.clear(slot);
                        kda = slot;
                    } else kda = DecodeState.newKdaState(k.weights());
                }
                case TokenMixer.Mla m -> kv = state != null ? state.kv[lw.index()]
                        : DecodeState.newMlaKv(m.weights(), t);
            }
            LayerStages s = layer(lw, h, snaps, t, kda, kv, cached, null);
            if (sink != null) sink.accept(s);
            h = s.partialOut();
            layersCompleted++;
          }
        }
        if (state != null) state.cached += t;
        float[] mix = new float[t * e];
        AttnRes.mix(mix, sources(snaps, h), t, e, w.outputResFold(), c.rmsNormEps());
        float[] norm = new float[t * e];
        Norms.rmsnorm(norm, mix, w.finalNorm(), t, e, c.rmsNormEps());
        int rows = allPositions ? t : 1, v = w.lmHead().rows();
        float[] x = allPositions ? norm : java.util.Arrays.copyOfRange(norm, (t - 1) * e, t * e);
        float[] logits = new float[rows * v];
        if (tables != null) tables.lmHead(workers, logits, x, rows);
        else MatVec.matmul(workers, logits, x, rows, w.lmHead());
        return new Result(t, rows, logits, mix, norm);
    }

    // ------------------------------------------------------------------ one layer (harness API)

    /**
     * Runs ONE decoder layer from given inputs, as the torch dump's single-layer run does: the incoming
     * partial [T][E], the snapshots it sees (oldest first; not modified), a fresh KDA state or an empty
     * MLA cache, all T tokens in one call at positions 0..T−1. Returns every stage.
     */
    public LayerStages runLayer(int layer, float[] partialIn, List<float[]> snapshots, int tokens) {
        return runLayer(layer, partialIn, snapshots, tokens, (int[]) null);
    }

    /**
     * {@link #runLayer(int, float[], List, int)} with the MoE selection taken from {@code forcedRouting} ([T][K],
     * selection order; the weights are still the router's own scores at those experts). Null: the router selects.
     */
    public LayerStages runLayer(int layer, float[] partialIn, List<float[]> snapshots, int tokens, int[] forcedRouting) {
        try (LayerSource.Held held = layers.acquire(layer)) {   // streamed: read and bound for this call, released after it
            return runLayer(held.weights(), partialIn, snapshots, tokens, forcedRouting);
        }
    }

    /**
     * {@link #runLayer(int, float[], List, int, int[])} with the layer bound again through {@code rewrite} of its
     * tensors by suffix, from the bytes the layer source already holds (bisect's swap and transpose candidates).
     */
    public LayerStages runLayer(int layer, java.util.function.UnaryOperator<WeightLoader.LayerTensors> rewrite, float[] partialIn, List<float[]> snapshots,
                                int tokens, int[] forcedRouting) {
        try (LayerSource.Held held = layers.acquire(layer, rewrite)) {
            return runLayer(held.weights(), partialIn, snapshots, tokens, forcedRouting);
        }
    }

    /** {@link #runLayer(int, float[], List, int)} for layer weights that are not part of this model (fixtures). */
    public LayerStages runLayer(LayerWeights lw, float[] partialIn, List<float[]> snapshots, int tokens) {
        return runLayer(lw, partialIn, snapshots, tokens, null);
    }

    /** {@link #runLayer(int, float[], List, int, int[])} for layer weights that are not part of this model. */
    public LayerStages runLayer(LayerWeights lw, float[] partialIn, List<float[]> snapshots, int tokens, int[] forcedRouting) {
        int e = c.hiddenSize();
        if (partialIn.length != tokens * e) throw new IllegalArgumentException("partial has " + partialIn.length + " floats, " + tokens + " x " + e + " expected");
        for (float[] s : snapshots) if (s.length != tokens * e) throw new IllegalArgumentException("a snapshot has " + s.length + " floats, " + tokens + " x " + e + " expected");
        Layers.KdaState kda = null;
        MlaKv kv = null;
        switch (lw.mixer()) {
            case TokenMixer.Kda k -> kda = DecodeState.newKdaState(k.weights());
            case TokenMixer.Mla m -> kv = DecodeState.newMlaKv(m.weights(), tokens);
        }
        return layer(lw, partialIn.clone(), new ArrayList<>(snapshots), tokens, kda, kv, 0, forcedRouting);
    }

    /**
     * Runs ONE decoder layer incrementally: the T tokens sit at positions state.cached() .. and read and
     * extend the layer's carried state (KDA recurrent + conv, MLA KV rows); advances state.cached().
     */
    public LayerStages runLayer(int layer, float[] partialIn, List<float[]> snapshots, int tokens, DecodeState state) {
        if (state.cached + tokens > state.capacity) {
            throw new ForwardException("MLA KV cache position " + (state.cached + tokens - 1) + " exceeds the limit " + (state.capacity - 1));
        }
        try (LayerSource.Held held = layers.acquire(layer)) {
            LayerWeights lw = held.weights();
            LayerStages s = layer(lw, partialIn.clone(), new ArrayList<>(snapshots), tokens, state.kda[lw.index()], state.kv[lw.index()], state.cached, null);
            state.cached += tokens;
            return s;
        }
    }

    private LayerStages layer(LayerWeights lw, float[] partialIn, List<float[]> snaps, int t, Layers.KdaState kda, MlaKv kv, int cached, int[] forced) {
        return layer(lw, partialIn, snaps, t, (out, in) -> {
            switch (lw.mixer()) {
                case TokenMixer.Kda k -> Layers.kda(workers, true, out, in, t, k.weights(), kda);
                case TokenMixer.Mla m -> Layers.mla(workers, true, out, in, t, m.weights(), kv, cached);
            }
        }, forced, kda);
    }

    /** The token mixer of one layer call: out [T][E] from the normed input [T][E], carrying whatever state it holds. */
    @FunctionalInterface
    interface Mixing {
        void mix(float[] out, float[] in);
    }

    /** One decoder layer (docs/semantics.md §4.1) with its token mixer given: the one-sequence call, or a step's mixers per sequence ({@link BatchStep}). */
    LayerStages layer(LayerWeights lw, float[] partialIn, List<float[]> snaps, int t, Mixing mixing, int[] forced, Layers.KdaState kda) {
        int e = c.hiddenSize();
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
        mixing.mix(attnOut, attnNorm);
        float[] partialAttn = cleared ? attnOut.clone() : add(partialIn, attnOut);
        float[] mlpIn = new float[t * e];
        AttnRes.mix(mlpIn, sources(snaps, partialAttn), t, e, lw.mlpResFold(), eps);
        float[] mlpNorm = new float[t * e];
        Norms.rmsnorm(mlpNorm, mlpIn, lw.postAttentionNorm(), t, e, eps);
        float[] mlpOut = new float[t * e];
        int[] idx = null;
        float[] wts = null;
        switch (lw.mlp()) {
            case Mlp.Dense d -> Layers.mlp(workers, true, mlpOut, mlpNorm, t, d.weights());
            case Mlp.LatentMoe m -> {
                idx = new int[t * m.topK()];
                wts = new float[t * m.topK()];
                moe(lw.index(), m, mlpOut, idx, wts, mlpNorm, t, forced);
            }
        }
        float[] partialOut = add(partialAttn, mlpOut);
        return new LayerStages(lw.index(), t, partialIn, attnIn, attnNorm, attnOut, partialAttn, mlpIn, mlpNorm, mlpOut, partialOut,
                idx, wts, kda, List.copyOf(snaps));
    }

    static float[][] sources(List<float[]> snaps, float[] partial) {
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

    // ------------------------------------------------------------------ Stable LatentMoE (§3.17, chunk-union)

    /**
     * Route every token, down-project, then per sub-chunk of {@value #MOE_CHUNK} tokens fetch the union of
     * selected experts ONCE each and apply each to all (token, slot) pairs that chose it (batched MXFP4);
     * then per token sum the contributions in the ORIGINAL top-K order — the same bits as one token at a time.
     * A failed expert load is counted, its slots stay zero, and the layer fails after the loop.
     * The one LatentMoE of the engine: the decoder layer runs it, and so does the kernel gate's latent_moe fixture.
     * y [T][E]; idx / wts [T][K] receive the routing; x [T][E] is the normed MLP input.
     */
    public void moe(int layer, Mlp.LatentMoe m, float[] y, int[] idx, float[] wts, float[] x, int t) {
        moe(layer, m, y, idx, wts, x, t, null);
    }

    /** {@link #moe(int, Mlp.LatentMoe, float[], int[], float[], float[], int)} with the selection taken from {@code forced} when not null. */
    public void moe(int layer, Mlp.LatentMoe m, float[] y, int[] idx, float[] wts, float[] x, int t, int[] forced) {
        int e = m.gate().cols(), k = m.topK(), lt = m.latent(), inter = m.intermediate();
        Router.route(workers, true, idx, wts, x, t, m.gate(), m.bias(), k, m.renormalize(), m.scaling(), forced);
        // the latent down-projection and the shared experts' gate and up projections read x: one pass
        int si = m.shared().gate().rows();
        float[] z = new float[t * lt], sg = new float[t * si], su = new float[t * si];
        MatVec.matmulAll(workers, x, t, new Matrix[] {m.down(), m.shared().gate(), m.shared().up()}, new float[][] {z, sg, su});
        float[] contrib = new float[t * k * lt];
        long dropsBefore = drops.get();
        String firstFailure = null;
        List<Integer> dropped = new ArrayList<>();
        for (int c0 = 0; c0 < t; c0 += MOE_CHUNK) {
            int c1 = Math.min(t, c0 + MOE_CHUNK);
            TreeMap<Integer, List<Integer>> union = new TreeMap<>();
            for (int i = c0 * k; i < c1 * k; i++) union.computeIfAbsent(idx[i], u -> new ArrayList<>()).add(i);
            experts.getMany(layer, union.keySet().stream().mapToInt(Integer::intValue).toArray());
            for (var entry : union.entrySet()) {
                Layers.Expert ex;
                try {
                    ex = kernelExpert(layer, entry.getKey(), m.experts(), lt, inter);
                } catch (ExpertLoadException fail) {
                    drops.incrementAndGet();
                    if (firstFailure == null) firstFailure = fail.getMessage();
                    dropped.add(entry.getKey());   // named once, in the exception that fails the run (not a line per expert on stderr)
                    continue;
                }
                List<Integer> slots = entry.getValue();
                int n = slots.size();
                float[] zs = new float[n * lt];
                for (int s = 0; s < n; s++) System.arraycopy(z, (slots.get(s) / k) * lt, zs, s * lt, lt);
                float[] g = new float[n * inter], u = new float[n * inter], dn = new float[n * lt];
                expert(ex, zs, n, g, u, dn, m.beta(), m.linearBeta());
                for (int s = 0; s < n; s++) System.arraycopy(dn, s * lt, contrib, slots.get(s) * lt, lt);
            }
        }
        if (drops.get() != dropsBefore) throw new ExpertDropException(layer, drops.get() - dropsBefore, dropped, firstFailure);
        float[] acc = new float[t * lt];
        for (int tok = 0; tok < t; tok++) {
            int a = tok * lt;
            for (int j = 0; j < k; j++) {
                float wj = wts[tok * k + j];
                int b = (tok * k + j) * lt;
                for (int i = 0; i < lt; i++) acc[a + i] = acc[a + i] + wj * contrib[b + i];
            }
        }
        if (m.latentNorm()) Norms.rmsnorm(acc, acc, m.norm(), t, lt, m.rmsEps());
        MatVec.matmul(workers, y, acc, t, m.up());
        float[] sh = new float[t * e];
        Layers.mlpDown(workers, true, sh, sg, su, t, m.shared());
        for (int i = 0; i < t * e; i++) y[i] = y[i] + sh[i];
    }

    /** One routed expert on n latent rows zs [n][Lt]: g = w1·z, u = w3·z [n][I], dn = w2·situ(g, u) [n][Lt]. */
    private void expert(Layers.Expert ex, float[] zs, int n, float[] g, float[] u, float[] dn, float beta, float linearBeta) {
        float[] act = new float[g.length];
        Mxfp4.matmul(workers, g, zs, n, ex.w1());
        Mxfp4.matmul(workers, u, zs, n, ex.w3());
        Activations.situGlu(act, g, u, g.length, beta, linearBeta);
        Mxfp4.matmul(workers, dn, act, n, ex.w2());
    }

    /**
     * One routed expert's outputs on n probe rows (the expert sweep, docs/formats.md §7.10), through the
     * same expert source, repacking and kernels as the MoE: w1 = w1·z, w3 = w3·z [n][I]; out = w2·situ(w1·z, w3·z)
     * [n][Lt]; w2 = w2·v [n][Lt] for probes v [n][I] of the intermediate space (w2 alone).
     */
    public record ExpertProbe(float[] w1, float[] w3, float[] w2, float[] out) {}

    /** {@link ExpertProbe} of (layer, expert) for latent probes z [n][Lt] and intermediate probes v [n][I]. */
    public ExpertProbe probeExpert(int layer, int expert, float[] z, float[] v, int n) throws ExpertLoadException {
        int lt = c.latentSize(), inter = c.moeIntermediate();
        if (z.length != n * lt || v.length != n * inter) {
            throw new IllegalArgumentException("probes of " + z.length + " and " + v.length + " floats, " + n + " x " + lt + " and " + n + " x " + inter + " expected");
        }
        Layers.Expert ex = kernelExpert(layer, expert, c.expertCount(), lt, inter);
        float[] g = new float[n * inter], u = new float[n * inter], dn = new float[n * lt], w2 = new float[n * lt];
        expert(ex, z, n, g, u, dn, c.situBeta(), c.situLinearBeta());
        Mxfp4.matmul(workers, w2, v, n, ex.w2());
        return new ExpertProbe(g, u, w2, dn);
    }

    /**
     * Whether every packed FP4 code of (layer, expert) is +0, read through the same expert source: its outputs are
     * exactly 0 for any scale (a sparse hole of a test fixture). The expert sweep skips the kernels for such an
     * expert; a real expert always runs them.
     */
    public boolean expertCodesAllZero(int layer, int expert) throws ExpertLoadException {
        ResidentExpert r = experts.get(layer, expert);
        if (r.form() instanceof KernelExperts k) return k.codesAllZero(r);
        for (ExpertPart p : new ExpertPart[] {ExpertPart.W1_PACKED, ExpertPart.W3_PACKED, ExpertPart.W2_PACKED}) {
            java.lang.foreign.MemorySegment b = r.part(p);
            long n = b.byteSize(), i = 0;
            for (; i + 8 <= n; i += 8) if (b.get(java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED, i) != 0) return false;
            for (; i < n; i++) if (b.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0) return false;
        }
        return true;
    }

    /** {@code perLayer} experts per layer, latent width {@code lt}, intermediate width {@code inter}: the layer's (config or fixture) geometry. */
    private Layers.Expert kernelExpert(int layer, int expert, int perLayer, int lt, int inter) throws ExpertLoadException {
        long key = (long) layer * perLayer + expert;
        if (memoize) {
            Layers.Expert ex = kernelExperts.get(key);
            if (ex != null) {
                experts.get(layer, expert); // counted as a get like any other
                return ex;
            }
        }
        ResidentExpert r = experts.get(layer, expert);
        if (r.form() instanceof KernelExperts k) { // repacked once, when the cache slot was filled
            if (k.intermediate() != inter || k.latent() != lt) {
                throw new ExpertLoadException(layer, expert, "held for [" + k.intermediate() + ", " + k.latent() + "], the layer needs [" + inter + ", " + lt + "]");
            }
            return k.expert(r);
        }
        Layers.Expert ex;
        try {
            ex = new Layers.Expert(Mxfp4.repack(r.part(ExpertPart.W1_PACKED), r.part(ExpertPart.W1_SCALE), inter, lt, codes),
                    Mxfp4.repack(r.part(ExpertPart.W3_PACKED), r.part(ExpertPart.W3_SCALE), inter, lt, codes),
                    Mxfp4.repack(r.part(ExpertPart.W2_PACKED), r.part(ExpertPart.W2_SCALE), lt, inter, codes));
        } catch (IllegalArgumentException | IndexOutOfBoundsException bad) {
            throw new ExpertLoadException(layer, expert, "bytes do not fit the MXFP4 geometry: " + bad.getMessage(), bad);
        }
        if (memoize) kernelExperts.put(key, ex);
        return ex;
    }
}
