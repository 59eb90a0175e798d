package k3j.plan;

import java.util.Locale;
import java.util.Optional;
import k3j.config.ModelConfig;

/**
 * The memory forecast printed before anything large is allocated (docs/semantics.md §7.4), and the two refusals
 * made from it (§7.3): the KV cache over 90% of MemAvailable (exit 2: a request the machine cannot hold)
 * and the whole plan over 95% (exit 1). A forecast only: the run must quote the measured PEAK RSS
 * ({@link MemInfo#peakRss()}), not this (pitfall 28). Sizes are in bytes; formulas in floats × 4.
 *
 * @param trunk          streamed: the trunk budget; resident: Σ the layers' bind bytes
 * @param trunkStreamed  whether the trunk is streamed from a packed trunk
 * @param modelTables    embed + lm_head (+ the three E-sized model vectors), or the ultra-mode stream chunk
 * @param ultra          ultra-low-memory mode (streamed model tables, one state slot in full recompute)
 * @param expertCache    the expert cache budget
 * @param recurrentState KDA recurrent + ShortConv state for every bound layer (one in ultra full recompute)
 * @param buffers        activations, AttnRes snapshots, layer scratch and logits for Tm = prompt + gen + 1 tokens
 * @param kvCache        the MLA KV cache (incremental decode only)
 * @param positions      Tm
 * @param jvm            the JVM's own footprint before the model is allocated (heap, metaspace, code, stacks)
 * @param bisect         what a bisect candidate adds while it runs (one matrix held transposed, one expert
 *                       rewritten); 0 for every other run
 */
public record MemoryPlan(long trunk, boolean trunkStreamed, long modelTables, boolean ultra, long expertCache,
                         long recurrentState, long buffers, long kvCache, int positions, JvmFootprint jvm, long bisect) {

    public MemoryPlan(long trunk, boolean trunkStreamed, long modelTables, boolean ultra, long expertCache, long recurrentState, long buffers, long kvCache,
                      int positions, JvmFootprint jvm) {
        this(trunk, trunkStreamed, modelTables, ultra, expertCache, recurrentState, buffers, kvCache, positions, jvm, 0);
    }

    /** This plan with a bisect candidate's scratch counted. */
    public MemoryPlan withBisect(long bytes) {
        return new MemoryPlan(trunk, trunkStreamed, modelTables, ultra, expertCache, recurrentState, buffers, kvCache, positions, jvm, bytes);
    }

    /** Exit codes of the two refusals (docs/semantics.md §7.9). */
    public static final int EXIT_PLAN = 1, EXIT_KV = 2;

    /**
     * The LM-head chunk a streamed run actually holds: whole rows of {@code rowBytes}, at most {@code chunkBytes} and at
     * most the head's {@code rows} (a small model's whole head is smaller than the 64 MiB chunk), as k3j.model.StreamedTables sizes it.
     */
    public static long streamedChunk(long chunkBytes, long rows, long rowBytes) {
        return Math.max(1, Math.min(rows, chunkBytes / rowBytes)) * rowBytes;
    }

    /**
     * @param trunkBytes     streamed: budget in bytes; resident: Σ layer bind bytes
     * @param ultraChunk     bytes of the bounded streaming chunk for embed/lm_head in ultra mode (pitfall 23)
     */

    public static MemoryPlan of(ModelConfig c, boolean streamed, long trunkBytes, long cacheBytes, boolean ultra, long ultraChunk,
                                boolean incremental, int promptTokens, int gen) {
        return of(c, streamed, trunkBytes, cacheBytes, ultra, ultraChunk, incremental, promptTokens, gen, JvmFootprint.measure());
    }

    /** As {@link #of(ModelConfig, boolean, long, long, boolean, long, boolean, int, int)} with a given JVM footprint. */
    public static MemoryPlan of(ModelConfig c, boolean streamed, long trunkBytes, long cacheBytes, boolean ultra, long ultraChunk,
                                boolean incremental, int promptTokens, int gen, JvmFootprint jvm) {
        long e = c.hiddenSize(), v = c.vocabSize();
        long tm = (long) promptTokens + gen + 1;
        long tables = ultra ? streamedChunk(ultraChunk, v, e * 2) + 2 * 4096 + 3 * e * 4 : 2 * v * e * 2 + 3 * e * 4;
        long p = c.kdaWidth(), d = c.kdaHeadDim(), k = c.shortConvKernel();
        long stateLayers = ultra && !incremental ? 1 : c.layerCount();
        long state = (p * d + 3 * p * (k - 1)) * 4 * stateLayers;
        long maxb = c.snapshotCapacity();
        long buffers = (tm * e + tm * maxb * e + layerScratch(c, tm, incremental) + v) * 4;
        return new MemoryPlan(trunkBytes, streamed, tables, ultra, cacheBytes, state, buffers, incremental ? kvBytes(c, tm) : 0, (int) tm, jvm);
    }

    /**
     * This plan serving {@code sequences} sequences at once (continuous batching, docs/semantics.md §4.7): a KV cache
     * and a recurrent state of each sequence's own, of {@code positions} positions each, and the buffers of one step
     * of at most {@code stepTokens} tokens, every one of them with its logits row.
     *
     * @param c          the model's config
     * @param sequences  sequences in one step at most
     * @param positions  positions of one sequence's state
     * @param stepTokens tokens of one step at most
     * @return the plan with those lines
     */
    public MemoryPlan serving(ModelConfig c, int sequences, int positions, int stepTokens) {
        if (sequences < 1 || positions < 1 || stepTokens < 1) throw new IllegalArgumentException("serving " + sequences + " sequences of " + positions + " positions, steps of " + stepTokens + " tokens");
        long e = c.hiddenSize(), v = c.vocabSize(), t = stepTokens;
        long p = c.kdaWidth(), d = c.kdaHeadDim(), k = c.shortConvKernel();
        long state = (p * d + 3 * p * (k - 1)) * 4 * c.layerCount() * sequences;
        long buffers = (t * e + t * c.snapshotCapacity() * e + layerScratch(c, t, true) + t * v) * 4;
        return new MemoryPlan(trunk, trunkStreamed, modelTables, ultra, expertCache, state, buffers, sequences * kvBytes(c, positions), positions, jvm, bisect);
    }

    /** MLA KV bytes for {@code positions}: positions · n_mla · (Hm·kvd + qr) · 4 (K3: 2,365,440 B per position). */
    public static long kvBytes(ModelConfig c, long positions) {
        return positions * c.mlaLayerCount() * ((long) c.mlaHeads() * c.mlaKvHeadDim() + c.qkRopeHeadDim()) * 4;
    }

    /** Floats of one layer's scratch for T tokens (docs/semantics.md §7.4). */
    static long layerScratch(ModelConfig c, long t, boolean cached) {
        long e = c.hiddenSize(), maxb = c.snapshotCapacity();
        long hm = c.mlaHeads(), qh = c.mlaQkHeadDim(), kvd = c.mlaKvHeadDim(), qr = c.qkRopeHeadDim();
        long mla = t * hm * qh + c.mlaKvAWidth() + c.qLoraRank() + 2 * hm * c.vHeadDim()
                + (cached ? t : t + t * hm * kvd + t * qr);   // cached: score term max(cap, T) with cap = Tm = T here
        long p = c.kdaWidth();
        long kda = 6 * t * p + t * c.kdaHeads() + 2 * p + c.kdaHeadDim();
        long lt = c.latentSize(), i = c.moeIntermediate();
        long moe = 2 * lt + 3 * i + lt + 3 * (long) c.sharedIntermediate() + e;
        return 3 * t * e + 2 * e + maxb * e + 2L * c.denseIntermediate() + Math.max(mla, Math.max(kda, moe));
    }

    /** The model's parts plus the JVM's own footprint: the figure to set against PEAK RSS. */
    public long total() {
        return trunk + modelTables + expertCache + recurrentState + buffers + kvCache + bisect + jvm.bytes();
    }

    /** The plan block, with the "available" line when MemAvailable is known. */
    public String block(MemInfo mem) {
        StringBuilder b = new StringBuilder("memory plan\n");
        line(b, trunkStreamed ? "trunk (STREAMED)" : "trunk (resident)", trunk, "");
        line(b, "embed + lm_head", modelTables, ultra ? " (STREAMED)" : " (resident)");
        line(b, "expert cache", expertCache, "");
        line(b, "recurrent state", recurrentState, "");
        line(b, "buffers", buffers, "");
        line(b, "KV cache", kvCache, "");
        if (bisect > 0) line(b, "bisect scratch", bisect, " (one candidate: a matrix held transposed or an expert rewritten)");
        line(b, "JVM itself", jvm.bytes(), " " + jvm.detail());
        line(b, "TOTAL", total(), "");
        if (mem.availableBytes().isPresent()) line(b, "available", mem.availableBytes().getAsLong(), "");
        return b.toString();
    }

    private static void line(StringBuilder b, String label, long bytes, String suffix) {
        b.append(String.format(Locale.ROOT, "  %-16s %s%s%n", label, Human.bytes(bytes), suffix));
    }

    /** A refusal: the message for standard error and the exit code. */
    public record Refusal(int exitCode, String message) {}

    /** The KV cache over 90% of MemAvailable (checked before the plan, docs/semantics.md §7.3 step 6). */
    public Optional<Refusal> kvRefusal(MemInfo mem) {
        if (kvCache == 0 || mem.availableBytes().isEmpty()) return Optional.empty();
        long avail = mem.availableBytes().getAsLong();
        if (kvCache <= 0.9 * avail) return Optional.empty();
        return Optional.of(new Refusal(EXIT_KV, String.format(Locale.ROOT,
                "REFUSING: the KV cache needs %s for %d positions and the machine has %s available (over 90%%).%n"
                        + "This is a MEMORY limit, not an engine ceiling: use a shorter prompt or fewer --gen tokens, "
                        + "or use full recompute (drop --incremental).", Human.bytes(kvCache), positions, Human.bytes(avail))));
    }

    /** The whole plan over 95% of MemAvailable (docs/semantics.md §7.3 step 10). */
    public Optional<Refusal> planRefusal(MemInfo mem) {
        if (mem.availableBytes().isEmpty()) return Optional.empty();
        long avail = mem.availableBytes().getAsLong();
        if (total() <= 0.95 * avail) return Optional.empty();
        return Optional.of(new Refusal(EXIT_PLAN, String.format(Locale.ROOT,
                "REFUSING TO START: this needs %s and may use at most %s (95%% of the %s available), a shortfall of %s.%n"
                        + "Options: a larger box, a smaller --cache-gb or --trunk-gb (or --preset auto), or fewer --layers.",
                Human.bytes(total()), Human.bytes((long) (0.95 * avail)), Human.bytes(avail),
                Human.bytes(total() - (long) (0.95 * avail)))));
    }
}
