package k3j.cli;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.kernels.Workers;
import k3j.model.BindException;
import k3j.model.ExpertDropException;
import k3j.model.Forward;
import k3j.model.ForwardException;
import k3j.model.Generation;
import k3j.model.Model;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 <model_dir> [options]}: greedy generation from raw ids (ENGINE §7.1), validated in the order
 * of §7.3 before anything large is allocated, the --out JSON of §7.7, --dump-logits of §7.8 and the exit
 * codes of §7.9. Prints the generated ids.
 */
@Command(name = "run",
        description = "Greedy generation: k3 <model_dir> --ids 1,2,3 [--gen N] [--incremental] [--out FILE] [--dump-logits PATH] [--threads N]",
        footer = "Exit codes: 0 success, 1 runtime failure (checkpoint, bind, forward), 2 bad request, 4 RUN INVALID (expert drops).")
final class RunCommand implements Callable<Integer> {
    static final int MAX_PROMPT = 32768, MAX_GEN = 4096, MAX_POSITIONS = 36864;
    /** Tests set this to pretend a machine size (bytes) for the KV refusal; unset = /proc/meminfo MemAvailable. */
    static final String MEM_AVAILABLE_PROPERTY = "k3.memAvailableBytes";

    @Parameters(index = "0", paramLabel = "MODEL_DIR", description = "the model directory (config.json + safetensors shards)")
    Path modelDir;

    @Option(names = "--ids", paramLabel = "IDS", description = "raw token ids, separated by ',' or spaces")
    String ids;

    @Option(names = "--prompt", paramLabel = "TEXT", description = "text prompt (needs a tokenizer)")
    String prompt;

    @Option(names = "--prompt-file", paramLabel = "PATH", description = "prompt bytes from a file (needs a tokenizer)")
    Path promptFile;

    @Option(names = "--config", paramLabel = "PATH", description = "config file (default <model_dir>/config.json)")
    Path config;

    @Option(names = "--gen", paramLabel = "N", defaultValue = "8", description = "tokens to generate, 0..4096 (default ${DEFAULT-VALUE})")
    int gen;

    @Option(names = "--incremental", description = "KV cache + carried KDA state (default: full recompute)")
    boolean incremental;

    @Option(names = "--layers", paramLabel = "N", description = "bind only the first N layers (the output is not the real model)")
    Integer layers;

    @Option(names = "--out", paramLabel = "FILE", defaultValue = "k3_run.json", description = "JSON results (default ${DEFAULT-VALUE})")
    Path out;

    @Option(names = "--dump-logits", paramLabel = "PATH", description = "write the V float32 logits of the FIRST step (little-endian, no header)")
    Path dumpLogits;

    @Option(names = "--threads", paramLabel = "N", description = "worker threads (default: available processors)")
    Integer threads;

    @Option(names = "--cache-gb", paramLabel = "X", description = "routed-expert cache budget in GB (1e9 bytes). Given: experts are served "
            + "by the cache; absent: resident when all experts fit in 64 GB, else a 64 GB cache")
    Double cacheGb;

    static final double DEFAULT_CACHE_GB = 64;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    @Override
    public Integer call() throws IOException {
        PrintWriter o = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        // 1. prompt sources
        int sources = (ids != null ? 1 : 0) + (prompt != null ? 1 : 0) + (promptFile != null ? 1 : 0);
        if (sources == 0) throw usage("one of --ids, --prompt or --prompt-file is required");
        if (sources > 1) throw usage("--ids, --prompt and --prompt-file are mutually exclusive");
        if (ids == null) throw usage("--prompt / --prompt-file need a tokenizer, which this build does not have: use --ids");
        if (threads != null && threads < 1) throw usage("--threads must be >= 1, got " + threads);
        if (cacheGb != null && !(cacheGb > 0)) throw usage("--cache-gb must be positive, got " + cacheGb);
        // 3. config
        ModelConfig cfg;
        try {
            cfg = ConfigReader.read(config != null ? config : modelDir.resolve("config.json"));
        } catch (ConfigException e) {
            err.println("ABORTED: " + e.getMessage());
            return ExitCode.USAGE;
        }
        if (layers != null && (layers < 1 || layers > cfg.layerCount())) throw usage("--layers must be 1.." + cfg.layerCount() + ", got " + layers);
        int bound = layers == null ? cfg.layerCount() : layers;
        if (bound < cfg.layerCount()) o.printf("NOTE: binding only %d of %d layers: the output is NOT the real model%n", bound, cfg.layerCount());
        // 4. prompt ids
        int[] promptIds = parseIds(ids);
        if (promptIds.length == 0) throw usage("no prompt ids parsed");
        for (int id : promptIds) if (id < 0 || id >= cfg.vocabSize()) throw usage("token id " + id + " is outside the vocabulary of " + cfg.vocabSize());
        // 5. limits
        if (gen < 0 || gen > MAX_GEN) throw usage("--gen must be 0.." + MAX_GEN + ", got " + gen);
        if (promptIds.length > MAX_PROMPT) throw usage("the prompt has " + promptIds.length + " ids, at most " + MAX_PROMPT);
        if (promptIds.length + gen + 1 > MAX_POSITIONS) throw usage("prompt + gen + 1 = " + (promptIds.length + gen + 1) + " positions, at most " + MAX_POSITIONS);
        // 6. incremental KV check
        if (incremental) {
            int positions = Generation.capacity(promptIds.length, gen);
            long perPosition = (long) cfg.mlaLayerCount() * ((long) cfg.mlaHeads() * cfg.mlaKvHeadDim() + cfg.qkRopeHeadDim()) * 4L;
            long need = perPosition * positions;
            o.printf(Locale.ROOT, "  KV cache : %s for %d positions (%.2f MB/position)%n", bytes(need), positions, perPosition / 1e6);
            long avail = memAvailable();
            if (avail > 0 && need > 0.9 * avail) {
                err.printf(Locale.ROOT, "REFUSING: the KV cache for %d positions needs %s and the machine has %s available (limit 90%%). "
                        + "This is a MEMORY limit, not an engine ceiling: shorten the request or use full recompute (drop --incremental).%n",
                        positions, bytes(need), bytes(avail));
                return ExitCode.USAGE;
            }
        }
        // 7. banner
        o.println("Kimi K3, Java (k3j), released checkpoint layout");
        o.println("  model    : " + modelDir);
        o.printf("  prompt   : %d tokens, generating %d (%s)%n", promptIds.length, gen, incremental ? "incremental" : "full recompute");
        // 8.-9. index and bind
        long t0 = System.nanoTime();
        Model model;
        try {
            CheckpointIndex idx = CheckpointIndex.open(modelDir);
            o.printf(Locale.ROOT, "indexed %d tensors from %d shards in %.2f s%n", idx.size(), idx.shards().size(), (System.nanoTime() - t0) / 1e9);
            model = Model.open(modelDir, cfg, bound);
        } catch (CheckpointException | BindException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
        o.flush();
        int rc = ExitCode.OK;
        Generation g = null;
        String failure = null;
        int nThreads = threads != null ? threads : Runtime.getRuntime().availableProcessors();
        long expertBytes = model.binding().layers().stream().flatMap(l -> l.experts().stream()).mapToLong(ExpertLocation::length).sum();
        double budgetGb = cacheGb != null ? cacheGb : DEFAULT_CACHE_GB;
        ExpertCache cache = null;
        if (cacheGb != null || expertBytes > budgetGb * 1e9) {
            try {
                cache = ExpertCache.open(model.experts(), ExpertCache.Settings.fromEnvironment((long) (budgetGb * 1e9), cfg.topK(), System.getenv()), null, err::println);
            } catch (ExpertLoadException | IllegalArgumentException e) {
                err.println("k3: expert cache: " + e.getMessage());
                model.close();
                return ExitCode.RUNTIME;
            }
            o.printf(Locale.ROOT, "routed experts: %s on disk, served by a %.2f GB cache (%d slots)%n", bytes(expertBytes), budgetGb, cache.geometry().slots());
        } else {
            o.printf(Locale.ROOT, "routed experts: %s, resident once read%n", bytes(expertBytes));
        }
        try (model; Workers w = Workers.of(nThreads)) {
            var forward = cache == null ? model.forward(w) : new Forward(model.weights(), cache, w, false);
            try {
                g = Generation.greedy(forward, promptIds, gen, incremental);
            } catch (ExpertDropException e) {
                failure = e.getMessage();
                rc = ExitCode.RUN_INVALID;
            } catch (ForwardException e) {
                failure = e.getMessage();
                rc = ExitCode.RUNTIME;
            }
            if (g != null) {
                StringBuilder sb = new StringBuilder();
                for (int id : g.generated()) sb.append(sb.isEmpty() ? "" : ",").append(id);
                o.println("generated ids: " + sb);
                if (dumpLogits != null && !g.stepLogits().isEmpty()) {
                    float[] l = g.stepLogits().get(0);
                    ByteBuffer b = ByteBuffer.allocate(4 * l.length).order(ByteOrder.LITTLE_ENDIAN);
                    b.asFloatBuffer().put(l);
                    Files.write(dumpLogits, b.array());
                    o.printf("wrote %s (%d float32 logits)%n", dumpLogits, l.length);
                }
            }
            o.printf("PEAK RSS for the whole run: %s%n", bytes(peakRss()));
            o.printf("layers completed: %d/%d; routed expert drops: %d%n%n", forward.layersCompleted(), bound, forward.expertDrops());
            if (cache != null) o.println(cache.report(true));
            writeOut(g, promptIds, bound, forward.layersCompleted(), forward.expertDrops(),
                    cache != null ? cache.totalStats().bytesRead() : model.experts().bytesRead());
            o.println("wrote " + out);
            if (rc == ExitCode.RUN_INVALID || forward.expertDrops() > 0) {
                err.println("RUN INVALID: " + forward.expertDrops() + " routed expert load(s) failed and were dropped from the MoE sum. "
                        + "The token ids above are CORRUPT. (" + failure + ")");
                rc = ExitCode.RUN_INVALID;
            } else if (failure != null) {
                err.println("forward pass failed: " + failure + "; aborting.");
            }
        } finally {
            if (cache != null) cache.close();
        }
        return rc;
    }

    static int[] parseIds(String s) {
        List<Integer> l = new ArrayList<>();
        for (String part : s.trim().split("[,\\s]+")) {
            if (part.isEmpty()) continue;
            try {
                l.add(Integer.parseInt(part));
            } catch (NumberFormatException e) {
                throw new CommandLine.ParameterException(new CommandLine(new RunCommand()), "--ids: '" + part + "' is not an integer token id");
            }
        }
        return l.stream().mapToInt(Integer::intValue).toArray();
    }

    private void writeOut(Generation g, int[] promptIds, int bound, int completed, long drops, long expertBytes) throws IOException {
        int[] generated = g == null ? new int[0] : g.generated();
        double wall = g == null ? 0 : g.seconds();
        try (OutputStream os = Files.newOutputStream(out); JsonGenerator j = new JsonFactory().createGenerator(os, JsonEncoding.UTF8)) {
            j.writeStartObject();
            j.writeFieldName("prompt_ids");
            j.writeArray(promptIds, 0, promptIds.length);
            j.writeFieldName("generated_ids");
            j.writeArray(generated, 0, generated.length);
            int[] full = new int[promptIds.length + generated.length];
            System.arraycopy(promptIds, 0, full, 0, promptIds.length);
            System.arraycopy(generated, 0, full, promptIds.length, generated.length);
            j.writeFieldName("full_ids");
            j.writeArray(full, 0, full.length);
            j.writeNumberField("layers", bound);
            j.writeNumberField("layers_requested", bound);
            j.writeNumberField("layers_completed", completed);
            j.writeNumberField("expert_drops", drops);
            j.writeNumberField("peak_rss_bytes", peakRss());
            j.writeFieldName("wall_seconds");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", wall));
            j.writeFieldName("seconds_per_token");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", generated.length == 0 ? 0.0 : wall / generated.length));
            j.writeNumberField("expert_bytes_read", expertBytes);
            j.writeNumberField("trunk_bytes_read", 0);
            j.writeNumberField("embedding_bytes_read", 0);
            j.writeNumberField("lm_head_bytes_read", 0);
            j.writeBooleanField("ultra_low_memory", false);
            j.writeNullField("generated_text");
            j.writeEndObject();
        }
    }

    /** MemAvailable in bytes, or -1 when unknown; {@value #MEM_AVAILABLE_PROPERTY} overrides it. */
    static long memAvailable() {
        String p = System.getProperty(MEM_AVAILABLE_PROPERTY, "");
        if (!p.isBlank()) return Long.parseLong(p.trim());
        try {
            for (String line : Files.readAllLines(Path.of("/proc/meminfo"))) {
                if (line.startsWith("MemAvailable:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024L;
            }
        } catch (IOException | NumberFormatException e) {
            return -1;
        }
        return -1;
    }

    /** VmHWM of /proc/self/status in bytes (0 when unknown). */
    static long peakRss() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmHWM:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024L;
            }
        } catch (IOException | NumberFormatException e) {
            return 0;
        }
        return 0;
    }

    static String bytes(long b) {
        if (b >= 1e9) return String.format(Locale.ROOT, "%.2f GB", b / 1e9);
        if (b >= 1e6) return String.format(Locale.ROOT, "%.2f MB", b / 1e6);
        return String.format(Locale.ROOT, "%.1f KB", b / 1e3);
    }
}
