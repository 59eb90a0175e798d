package k3j.model;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import k3j.cache.CacheGeometry;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.kernels.Mxfp4;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;
import k3j.plan.PlanRefused;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkStream;

/**
 * How a runtime holds its weights, decided once from the memory flags and used twice on a bound
 * {@link Assembly}: to plan (what the trunk and the expert cache will hold, from the model's own sizes) and to
 * load (the same trunk options and cache budget). {@code k3 run}, {@code k3 conform}, {@code k3 bisect} and the
 * checkpoint gates share it, so a conformance runs under exactly the plan a run would.
 *
 * @param trunk        the packed trunk to stream the decoder layers from, or null: resident, bound from the shards
 * @param trunkOptions how the trunk is streamed (budget, ring, CRC check); null when resident
 * @param cacheBytes   the routed-expert cache budget
 * @param cacheGiven   the budget was asked for (a flag or a preset): the experts go through the cache even when all would fit
 * @param ultra        the embedding and LM-head tables read on demand through one bounded chunk (the ultra preset)
 */
public record Residency(Path trunk, StreamOptions trunkOptions, long cacheBytes, boolean cacheGiven, boolean ultra) {
    /** Everything resident unless the experts exceed 64 GB (the run's default). */
    public static final Residency RESIDENT = new Residency(null, null, 64_000_000_000L, false, false);
    /** How a conformance holds experts for the kernel: the default nibble codes (the same bits in every form). */
    private static final Mxfp4.Codes CODES = Mxfp4.Codes.NIBBLES;

    public Residency {
        if (trunk != null && trunkOptions == null) throw new IllegalArgumentException("a streamed trunk needs its options");
        if (cacheBytes <= 0) throw new IllegalArgumentException("the expert cache budget must be positive, got " + cacheBytes);
    }

    public boolean streamed() {
        return trunk != null;
    }

    /** Whether the routed experts go through the cache: streamed, asked for, or more than the budget holds. */
    public boolean cached(Assembly a) {
        return streamed() || cacheGiven || a.expertBytes() > cacheBytes;
    }

    /** The trunk options for the bound layers. */
    public StreamOptions trunkOptions(Assembly a) {
        return trunkOptions.withLayers(a.layers());
    }

    /** What the trunk will hold: the streamed plan's buffers, or the bound layers' bytes when resident. */
    public long plannedTrunk(Assembly a) {
        return streamed() ? TrunkStream.plan(TrunkManifest.read(trunk), trunkOptions(a)).totalBytes() : a.trunkBytes();
    }

    /** What the routed experts will hold: the cache's arena (never more slots than the model has experts), or all of them as stored and repacked. */
    public long plannedExperts(Assembly a) {
        return cached(a) ? plannedCache(a, cacheBytes, CODES) : residentExperts(a, CODES);
    }

    /** One expert in the kernel's form ({@code codes}), or 0 when the model has no routed experts. */
    static long formBytes(Assembly a, Mxfp4.Codes codes) {
        return a.binding().layers().stream().flatMap(l -> l.experts().stream()).findFirst().map(l -> a.kernelForm(codes).bytes(l)).orElse(0L);
    }

    /** Experts resident once read: the stored bytes plus each one's repacked form (the forward keeps both). */
    public static long residentExperts(Assembly a, Mxfp4.Codes codes) {
        long n = a.binding().layers().stream().mapToLong(l -> l.experts().size()).sum();
        return a.expertBytes() + n * formBytes(a, codes);
    }

    /**
     * The arena a cache of {@code budget} bytes allocates for the bound experts, a slot holding the repacked form
     * (the budget itself when below one token's working set: the cache refuses it when opened, naming the sizes).
     */
    public static long plannedCache(Assembly a, long budget, Mxfp4.Codes codes) {
        long stored = a.binding().layers().stream().flatMap(l -> l.experts().stream()).mapToLong(ExpertLocation::length).findFirst().orElse(0);
        long one = Math.max(stored, formBytes(a, codes));
        if (one <= 0) return budget;
        try {
            return CacheGeometry.plan(one, budget, a.config().topK(), (long) a.layers() * a.config().expertCount()).arenaBytes();
        } catch (IllegalArgumentException e) {
            return budget;
        }
    }

    /** The memory plan of a forward over {@code promptTokens} + {@code gen} positions. */
    public MemoryPlan plan(Assembly a, boolean incremental, int promptTokens, int gen) {
        return MemoryPlan.of(a.config(), streamed(), plannedTrunk(a), plannedExperts(a), ultra, StreamedTables.DEFAULT_CHUNK_BYTES, incremental, promptTokens, gen);
    }

    /**
     * Loads the runtime: the model (its decoder layers resident unless streamed), the trunk stream, the expert
     * cache ({@code env}: the cache settings the environment may change, K3_CACHE_POLICY, K3_NOPREFETCH).
     * A cache that cannot open is a {@link ForwardException} naming it.
     */
    public void load(Assembly a, Map<String, String> env, Consumer<String> notes) {
        a.model(!streamed());
        if (streamed()) a.streamTrunk(trunk, trunkOptions(a));
        if (ultra) a.streamTables(StreamedTables.DEFAULT_CHUNK_BYTES);
        if (cached(a)) {
            try {
                a.cacheExperts(ExpertCache.Settings.fromEnvironment(cacheBytes, a.config().topK(), env), CODES, null, notes);
            } catch (ExpertLoadException | IllegalArgumentException e) {
                throw new ForwardException("expert cache: " + e.getMessage());
            }
        }
    }

    /**
     * A loader for {@code Conformance.open}: plans a forward over {@code tokens} positions, hands the plan to
     * {@code planned} (to print its block), refuses with {@link PlanRefused} when it does not fit {@code mem}, else
     * loads and hands the opened assembly to {@code opened}.
     */
    public Consumer<Assembly> planned(MemInfo mem, int tokens, boolean incremental, Consumer<MemoryPlan> planned, Consumer<Assembly> opened,
                                      Consumer<String> notes) {
        return planned(mem, tokens, incremental, a -> 0L, planned, opened, notes);
    }

    /** The same, with {@code extra} bytes of the opened assembly counted in the plan (a bisect's candidate scratch). */
    public Consumer<Assembly> planned(MemInfo mem, int tokens, boolean incremental, java.util.function.ToLongFunction<Assembly> extra, Consumer<MemoryPlan> planned,
                                      Consumer<Assembly> opened, Consumer<String> notes) {
        return a -> {
            MemoryPlan p = plan(a, incremental, tokens, 0).withBisect(extra.applyAsLong(a));
            planned.accept(p);
            p.planRefusal(mem).ifPresent(r -> {
                throw new PlanRefused(r);
            });
            load(a, System.getenv(), notes);
            opened.accept(a);
        };
    }

    /** What was opened, one line each: the trunk stream's plan and the expert cache's geometry (as a run prints them). */
    public static String describe(Assembly a) {
        StringBuilder b = new StringBuilder();
        if (a.trunk() != null) b.append(a.trunk().describe());
        if (a.tables() != null) {
            b.append(String.format(Locale.ROOT, "model tables: embed + lm_head STREAMED from the checkpoint (chunks of %d rows, %s)%n", a.tables().chunkRows(),
                    Human.bytes(a.tables().chunkBytes())));
        }
        ExpertCache c = a.cache();
        b.append(c != null
                ? String.format(Locale.ROOT, "routed experts: %s on disk, served by a %s cache (%d slots of %s, %s)%n", Human.bytes(a.expertBytes()),
                        Human.bytes(c.geometry().arenaBytes()), c.geometry().slots(), Human.bytes(c.geometry().slotBytes()), c.form())
                : String.format(Locale.ROOT, "routed experts: %s, resident once read, kept %s%n", Human.bytes(a.expertBytes()), a.kernelForm(CODES)));
        return b.toString();
    }
}
