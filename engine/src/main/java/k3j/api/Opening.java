package k3j.api;

import java.nio.file.Path;
import java.util.Locale;
import java.util.function.Consumer;
import k3j.cache.CacheTrace;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.config.ModelConfig;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.kernels.KernelPath;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.BindException;
import k3j.model.Residency;
import k3j.model.StreamedTables;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;
import k3j.tokenizer.Tokenizer;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkStream;

/**
 * How an {@link Engine} is opened: checkpoint index → binding → the memory plan from the model's own sizes (refused
 * before anything large is allocated) → the model, the streamed trunk, the streamed tables and the expert cache the
 * plan asks for, each failure named by its stage ({@link Engine.OpenException}).
 */
final class Opening {
    private Opening() {}

    /** The model in {@code modelDir} described by {@code config} under {@code plan}, with {@code tokenizer} (already loaded, or null) and I/O {@code intercepts}. */
    static Engine open(Path modelDir, ModelConfig config, Plan plan, Engine.Options o, Tokenizer tokenizer, Assembly.Intercepts intercepts) {
        MemInfo mem = o.memory() != null ? o.memory().memInfo() : MemInfo.read();
        long t0 = System.nanoTime();
        Assembly rt;
        try {
            CheckpointIndex idx = CheckpointIndex.open(modelDir);
            o.report().accept(String.format(Locale.ROOT, "indexed %d tensors from %d shards in %.2f s%n", idx.size(), idx.shards().size(), (System.nanoTime() - t0) / 1e9));
            rt = Assembly.bind(idx, config, o.layers(), intercepts);
        } catch (CheckpointException | BindException e) {
            throw new Engine.OpenException("", e);
        }
        try {
            MemoryPlan p = plan(rt, plan, o, mem);
            KernelPath.set(o.kernels().mode());
            CacheTrace trace = load(rt, plan, o);
            return new Engine(rt, p, tokenizer, trace, Workers.of(o.threads()), o.codes().codes());
        } catch (RuntimeException | Error e) {
            rt.close();
            throw e;
        }
    }

    /** Whether the routed experts go through the cache: streamed, asked for, traced, or more than the budget holds. */
    private static boolean cached(Assembly rt, Plan plan, Engine.Options o) {
        return plan.streamed() || plan.cacheGiven() || o.cacheTrace() || rt.expertBytes() > plan.cacheGb() * 1e9;
    }

    private static StreamOptions trunkOptions(Assembly rt, Plan plan, Engine.Options o) {
        return StreamOptions.budget(plan.trunkBytes()).withRing(plan.ring()).withLayers(rt.layers())
                .withNotes(s -> o.notes().accept("k3: note: " + s)).withVerifyCrc(o.trunkCrc()).withCheck(plan.verifyTrunk().check());
    }

    /** The memory plan from the model's own sizes (what the trunk plan and the cache will hold, not the budgets), refused when it does not fit. */
    private static MemoryPlan plan(Assembly rt, Plan plan, Engine.Options o, MemInfo mem) {
        long trunkOnDisk = rt.trunkBytes();
        if (plan.streamed()) o.report().accept(String.format("trunk on disk : %s total (STREAMED from %s, not held in RAM)%n", Human.bytes(trunkOnDisk), plan.trunk()));
        else o.report().accept(String.format("trunk on disk : %s total (resident: bound from the shards)%n", Human.bytes(trunkOnDisk)));
        long trunkPlanned;
        try {
            trunkPlanned = plan.streamed() ? TrunkStream.plan(TrunkManifest.read(plan.trunk()), trunkOptions(rt, plan, o)).totalBytes() : trunkOnDisk;
        } catch (TrunkException e) {
            throw new Engine.OpenException("trunk", e);
        }
        MemoryPlan p = MemoryPlan.of(rt.config(), plan.streamed(), trunkPlanned,
                cached(rt, plan, o) ? Residency.plannedCache(rt, plan.cacheBytes(), o.codes().codes()) : Residency.residentExperts(rt, o.codes().codes()),
                plan.ultra(), StreamedTables.DEFAULT_CHUNK_BYTES, o.plannedIncremental(), o.plannedPrompt(), o.plannedTokens());
        o.report().accept(p.block(mem));
        p.planRefusal(mem).ifPresent(r -> {
            throw new Engine.OpenException(r);
        });
        return p;
    }

    /** Model, trunk, tables, cache: opened through the assembly in that order, each failure named. */
    private static CacheTrace load(Assembly rt, Plan plan, Engine.Options o) {
        Consumer<String> report = o.report();
        try {
            rt.model(!plan.streamed());
        } catch (CheckpointException | BindException e) {
            throw new Engine.OpenException("", e);
        }
        CacheTrace trace = o.cacheTrace() ? new CacheTrace(rt.layers(), rt.config().expertCount()) : null;
        if (plan.streamed()) {
            try {
                report.accept(rt.streamTrunk(plan.trunk(), trunkOptions(rt, plan, o)).describe());
            } catch (TrunkException | CheckpointException e) {
                throw new Engine.OpenException("trunk", e);
            }
        }
        if (plan.ultra()) {
            StreamedTables t;
            try {
                t = rt.streamTables(StreamedTables.DEFAULT_CHUNK_BYTES);
            } catch (CheckpointException | IllegalArgumentException e) {
                throw new Engine.OpenException("model tables", e);
            }
            report.accept(String.format(Locale.ROOT, "model tables: embed + lm_head STREAMED from the checkpoint (embedding rows on demand, the LM head in chunks of %d rows, %s)%n",
                    t.chunkRows(), Human.bytes(t.chunkBytes())));
        }
        if (cached(rt, plan, o)) {
            ExpertCache cache;
            try {
                cache = rt.cacheExperts(ExpertCache.Settings.fromEnvironment(plan.cacheBytes(), rt.config().topK(), System.getenv()), o.codes().codes(), trace, o.notes());
            } catch (ExpertLoadException | IllegalArgumentException e) {
                throw new Engine.OpenException("expert cache", e);
            }
            report.accept(String.format(Locale.ROOT, "routed experts: %s on disk, served by a %s cache (%d slots of %s, %s)%n", Human.bytes(rt.expertBytes()),
                    Human.bytes(cache.geometry().arenaBytes()), cache.geometry().slots(), Human.bytes(cache.geometry().slotBytes()), cache.form()));
        } else {
            report.accept(String.format(Locale.ROOT, "routed experts: %s, resident once read, kept %s%n", Human.bytes(rt.expertBytes()), rt.kernelForm(o.codes().codes())));
        }
        MemInfo.peakRss().ifPresent(p -> report.accept(String.format("peak RSS after loading weights: %s  (the plan above is a forecast, this is measured)%n", Human.bytes(p))));
        return trace;
    }
}
