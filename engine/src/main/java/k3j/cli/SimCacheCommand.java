package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.cache.CacheGeometry;
import k3j.cache.CacheSimulator;
import k3j.cache.CacheTrace;
import k3j.model.ModelSizes;
import k3j.plan.Human;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 sim-cache TRACE_DIR}: replays a {@code --dump-cache-trace} trace at several cache
 * sizes under LRU, S3-FIFO, window-LFU, Belady and pinned+LRU and prints the docs/semantics.md §9 table.
 */
@Command(name = "sim-cache", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Replay an expert trace (written by --dump-cache-trace) at several cache sizes.")
final class SimCacheCommand implements Callable<Integer> {
    static final double[] DEFAULT_GB = {8, 16, 32, 64, 128, 192, 256, 384, 512, 768, 1024, 1450};

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", paramLabel = "TRACE_DIR", description = "directory holding expert_trace.bin, or the file itself")
    Path trace;

    @Option(names = "--capacities", split = ",", paramLabel = "GB",
            description = "cache sizes in GB (1e9 bytes); default 8,16,32,64,128,192,256,384,512,768,1024,1450")
    double[] capacities;

    @Option(names = "--slots", split = ",", paramLabel = "N",
            description = "cache sizes in slots instead of GB (a live cache's slot count); not with --capacities")
    int[] slots;

    @Option(names = "--model", paramLabel = "MODEL_DIR",
            description = "the model the trace was recorded on: expert size, top-k, MoE layers and experts come from it "
                    + "(without it, and without the options below, the released Kimi K3's sizes are assumed, and the output says so; "
                    + "the trace's layers and experts are then bounded by its folder's expert_hist.json, or by the released model's)")
    Path model;

    @Option(names = "--expert-bytes", paramLabel = "BYTES", description = "bytes per expert (default: the model's; K3: 17547264)")
    Long expertBytes;

    @Option(names = "--disk-mbs", paramLabel = "MB/S", defaultValue = "1234",
            description = "disk rate for TIME/TOK (default ${DEFAULT-VALUE}, the measured random-cold rate)")
    double diskMBps;

    @Option(names = "--top-k", paramLabel = "K",
            description = "experts per token; sizes below K + 1 slots are skipped, the last min(K, 64, slots - 1) served are protected (default: the model's; K3: 16)")
    Integer topK;

    @Option(names = "--batched",
            description = "replay each run of same-layer requests as a batch prefetch first (the engine's getMany), and print TRUE hit rates")
    boolean batched;

    @Option(names = "--requests-per-token", paramLabel = "N",
            description = "get() requests per decoded token (default: the model's MoE layers x top-k; K3: 92 x 16 = 1472)")
    Long perToken;

    @Option(names = "--pool-experts", paramLabel = "N", description = "experts in the whole pool (default: the model's; K3: 92 x 896 = 82432)")
    Long poolExperts;

    private ModelSizes sizes;
    private int layerCount;
    private java.util.function.IntPredicate moeLayer;

    @Override
    public Integer call() throws IOException {
        CommandLine cl = spec.commandLine();
        if (!Files.exists(trace)) throw new CommandLine.ParameterException(cl, "no trace at " + trace);
        if (capacities != null && slots != null) throw new CommandLine.ParameterException(cl, "--capacities and --slots are mutually exclusive");
        if (model != null && !Files.isDirectory(model)) throw new CommandLine.ParameterException(cl, "--model: no such folder: " + model);
        sizes = model != null ? ModelSizes.of(model) : ModelSizes.RELEASED;
        if (model != null) {
            k3j.config.ModelConfig cfg = k3j.config.ConfigReader.read(model.resolve("config.json"));
            layerCount = cfg.layerCount();
            moeLayer = l -> cfg.mlpKind(l) == k3j.config.MlpKind.MOE;
        }
        boolean assumed = model == null && (expertBytes == null || topK == null || perToken == null || poolExperts == null);
        if (expertBytes == null) expertBytes = sizes.expertBytes();
        if (topK == null) topK = sizes.topK();
        if (perToken == null) perToken = sizes.requestsPerToken();
        if (poolExperts == null) poolExperts = sizes.poolExperts();
        if (expertBytes <= 0 || diskMBps <= 0 || topK < 1 || perToken < 1 || poolExperts < 1) {
            throw new CommandLine.ParameterException(cl, "--expert-bytes, --disk-mbs, --top-k, --requests-per-token and --pool-experts must be positive");
        }
        // a cache larger than the pool holds nothing more: such a size is refused before anything is sized from it
        String pool = String.format(Locale.ROOT, "the pool of %d experts (%s, %s)", poolExperts, Human.bytes((double) poolExperts * expertBytes),
                model != null ? model.toString() : "--pool-experts, or the released model's");
        if (capacities != null) for (double gb : capacities) {
            if (!(gb > 0) || !Double.isFinite(gb)) throw new CommandLine.ParameterException(cl, "--capacities must be positive and finite, got " + gb);
            if (gb * 1e9 / expertBytes > poolExperts) {
                throw new CommandLine.ParameterException(cl, "--capacities " + gb + " GB holds more than " + pool + ": give sizes up to the pool's");
            }
        }
        if (slots != null) for (int s : slots) {
            if (s < 1) throw new CommandLine.ParameterException(cl, "--slots must be positive, got " + s);
            if (s > poolExperts) throw new CommandLine.ParameterException(cl, "--slots " + s + " is more than " + pool + ": give sizes up to the pool's");
        }
        PrintWriter out = cl.getOut();
        out.printf(Locale.ROOT, "sizes: %s%s: %s per expert, top-%d, %d requests per token, a pool of %d experts%n", sizes.name(),
                assumed ? " (ASSUMED: no --model given; give --model DIR for the model the trace came from)" : "",
                Human.bytes(expertBytes), topK, perToken, poolExperts);
        int[] pairs;
        try {
            Path hist = Files.isDirectory(trace) ? trace.resolve(CacheTrace.HIST_FILE) : null;
            if (model != null) {
                pairs = CacheTrace.readPairs(trace, layerCount, moeLayer, sizes.expertsPerLayer(), model.toString());
            } else if (hist != null && Files.exists(hist)) {
                // a trace folder that k3 wrote names its own model's geometry: its pairs are bounded by that
                int[] geometry = CacheTrace.readGeometry(hist);
                pairs = CacheTrace.readPairs(trace, geometry[0], l -> true, geometry[1],
                        "the model of " + hist + " (" + geometry[0] + " layers, " + geometry[1] + " experts each)");
            } else {
                pairs = CacheTrace.readPairs(trace, sizes.moeLayers() + 1, l -> l >= 1, sizes.expertsPerLayer(), sizes.name() + " (layer 0 dense, 1.." + sizes.moeLayers() + " MoE)");
            }
        } catch (IOException e) {
            throw new CommandLine.ParameterException(cl, "refused: " + k3j.io.SafeFiles.why(e));
        }
        print(new CacheSimulator(pairs), out);
        return ExitCode.OK;
    }

    private void print(CacheSimulator sim, PrintWriter out) {
        long n = sim.requests();
        long tokens = Math.max(n / perToken, 1);
        out.printf(Locale.ROOT, "trace: %d requests, %d distinct experts, about %d token(s)%n", n, sim.distinct(), tokens);
        out.printf(Locale.ROOT, "distinct experts touched: %d of %d (%.2f%% of the pool)%n", sim.distinct(), poolExperts, 100.0 * sim.distinct() / poolExperts);
        out.printf(Locale.ROOT, "if nothing were cached: %s per token%n", Human.bytes((double) perToken * expertBytes));
        StringBuilder hot = new StringBuilder("hottest experts:");
        for (long[] h : sim.hottest(5)) hot.append(String.format(Locale.ROOT, "  L%d/%d x%d", h[0], h[1], h[2]));
        out.println(hot);
        out.printf(Locale.ROOT, "total reuse: %d of %d requests are repeats (%.1f%%)%n%n", sim.repeats(), n, n == 0 ? 0 : 100.0 * sim.repeats() / n);

        List<CacheSimulator.Row> rows = new ArrayList<>();
        int skipped = 0;
        if (slots != null) {
            for (int s : slots) {
                if (s < topK + 1) skipped++;
                else rows.add(sim.row(s + " slots", s, topK, batched));
            }
        } else if (capacities == null && model != null) {
            // the model's own scale: from one token's working set, doubling, up to the whole pool
            for (long s = topK + 1; ; s *= 2) {
                int c = (int) Math.min(s, Math.min(poolExperts, Integer.MAX_VALUE));
                rows.add(sim.row(c + " slots", c, topK, batched));
                if (c >= poolExperts || c == Integer.MAX_VALUE) break;
            }
        } else {
            for (double gb : capacities != null ? capacities : DEFAULT_GB) {
                long s = (long) Math.floor(gb * 1e9 / expertBytes);
                if (s < topK + 1) skipped++;
                else rows.add(sim.row(String.format(Locale.ROOT, "%s GB", trim(gb)), (int) Math.min(s, Integer.MAX_VALUE), topK, batched));
            }
        }
        out.printf(Locale.ROOT, "%-9s %8s %9s %9s %10s %9s %9s %12s %11s%n", "CACHE", "SLOTS", "LRU", "S3-FIFO", "WINDOW-LFU", "BELADY", "PIN+LRU",
                "READ/TOK", "TIME/TOK");
        out.println("-".repeat(97));
        for (CacheSimulator.Row r : rows) {
            double gbPerTok = (n - r.windowLfu()) * (double) expertBytes / 1e9 / tokens;
            out.printf(Locale.ROOT, "%-9s %8d %8.2f%% %8.2f%% %9.2f%% %8.2f%% %8.2f%% %12s %11s%n", r.label(), r.slots(),
                    pct(r.lru(), n), pct(r.s3fifo(), n), pct(r.windowLfu(), n), pct(r.belady(), n), pct(r.pinnedLru(), n),
                    Human.bytes(gbPerTok * 1e9), Human.seconds(gbPerTok * 1000 / diskMBps));
        }
        if (skipped > 0) out.printf(Locale.ROOT, "(%d size(s) below top-k + 1 = %d slots skipped: the engine refuses them)%n", skipped, topK + 1);
        out.println();
        out.printf(Locale.ROOT, "compulsory misses: %d (every expert must be read at least once), a ceiling of%n", sim.distinct());
        out.printf(Locale.ROOT, "%.2f%% hit rate for ANY policy at ANY size on this trace.%n", pct(n - sim.distinct(), n));
        out.printf(Locale.ROOT, "holding every expert this trace touched needs %s%n", Human.bytes(sim.distinct() * (double) expertBytes));
        out.printf(Locale.ROOT, "holding the whole pool needs %s%n", Human.bytes(poolExperts * (double) expertBytes));
        out.printf(Locale.ROOT, "LRU, S3-FIFO and WINDOW-LFU replay the engine's policies, protection ring included (the last%n"
                + "min(top-k, 64, slots - 1) experts served are never evicted); at a live cache's slot count%n"
                + "they equal its hits (without batch prefetch) or, with --batched, its TRUE resident hits%n"
                + "(hits - prefetch reads, batch prefetch on).%n");
        if (batched) out.printf(Locale.ROOT, "Columns LRU, S3-FIFO and WINDOW-LFU are TRUE hit rates: each layer's run of requests was prefetched first.%n");
        out.printf(Locale.ROOT, "BELADY (with bypass) and PIN+LRU (the hottest slots/2 experts of THIS trace pinned) use%n"
                + "future knowledge: they are bounds, not policies.%n"
                + "READ/TOK counts window-LFU reads, the default policy (TIME/TOK: at --disk-mbs); a slot holds %s in the engine (expert + O_DIRECT pad).%n",
                Human.bytes(CacheGeometry.slotBytes(expertBytes)));
        out.flush();
    }

    private static double pct(long hits, long n) {
        return n == 0 ? 0 : 100.0 * hits / n;
    }

    private static String trim(double gb) {
        return gb == Math.rint(gb) ? Long.toString((long) gb) : Double.toString(gb);
    }
}
