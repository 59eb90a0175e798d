package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import k3j.api.internal.ApiInternals;
import k3j.cache.CacheTrace;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.dump.ReferenceDump;
import k3j.io.AtomicWrite;
import k3j.kernels.KernelPath;
import k3j.kernels.Mxfp4;
import k3j.model.Assembly;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;
import k3j.verdict.ConformException;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 <model_dir> [options]}: greedy generation from raw ids (docs/semantics.md §7.1), validated in the order
 * of §7.3 before anything large is allocated, the memory plan of §7.4, the STEP table of §7.5, the end-of-run
 * output of §7.6, the --out JSON of §7.7, --dump-logits of §7.8 and the exit codes of §7.9. With
 * {@code --trunk DIR} the decoder layers are streamed from a packed trunk and the routed experts served by the
 * expert cache; the tokens and logits are bit-identical to the resident run. The flags are checked here; opening,
 * generating, chatting and the state are {@link k3j.api.Engine}'s, and this class prints what it returns.
 */
@Command(name = "run", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Greedy generation: k3 <model_dir> --ids 1,2,3 [--gen N] [--recompute] [--trunk DIR [--preset NAME | --trunk-gb X --cache-gb Y]] ...",
        footer = "Exit codes: 0 success, 1 runtime failure (checkpoint, bind, trunk, forward, memory plan refused), 2 bad request, "
                + "4 RUN INVALID (expert drops), 130 stopped by SIGINT (Ctrl-C) and 143 by SIGTERM during generation (the tokens so far are "
                + "printed and written, with \"stopped\": \"interrupted\" in --out). Files (docs/files.md): every output is written whole or not at all, never onto a device, an input "
                + "or another output; every input must be a regular file within its size cap.")
final class RunCommand implements Callable<Integer> {
    static final int MAX_PROMPT = 32768, MAX_GEN = 4096, MAX_POSITIONS = k3j.api.Engine.MAX_POSITIONS;
    /** Tests set this to pretend a machine size (bytes) for the refusals; unset = /proc/meminfo MemAvailable. */
    static final String MEM_AVAILABLE_PROPERTY = "k3.memAvailableBytes";

    private final Assembly.Intercepts intercepts;

    RunCommand() {
        this(Assembly.Intercepts.NONE);
    }

    /** {@code intercepts}: where a caller (the tests) interposes on the run's expert and trunk reads. */
    RunCommand(Assembly.Intercepts intercepts) {
        this.intercepts = intercepts;
    }

    @CommandLine.Mixin
    ModelFolder model;

    @CommandLine.Mixin
    MemoryOptions memory;

    @CommandLine.Mixin
    ThreadsOption threads;

    @Option(names = "--ids", paramLabel = "IDS", description = "raw token ids, separated by ',' or spaces")
    String ids;

    @Option(names = "--prompt", paramLabel = "TEXT", description = "text prompt, tokenized with --tok, by default the model folder's tokenizer "
            + "(added tokens such as <|end_of_msg|> are recognised)")
    String prompt;

    @Option(names = "--prompt-file", paramLabel = "PATH", description = "prompt bytes from a file, tokenized with --tok")
    Path promptFile;

    @CommandLine.Mixin
    TextOptions text = new TextOptions();

    @Option(names = "--config", paramLabel = "PATH", description = "config file (default <model_dir>/config.json)")
    Path config;

    @Option(names = "--gen", paramLabel = "N", defaultValue = "8", description = "tokens to generate, 0..4096 (default ${DEFAULT-VALUE})")
    int gen;

    @Option(names = "--recompute", description = "full recompute: every step one forward over the whole sequence (the same ids and logits "
            + "as the default incremental decoding, which carries a KV cache and the KDA state and feeds one token a step)")
    boolean recompute;

    @Option(names = "--incremental", description = "incremental decoding, the default (accepted for older command lines)")
    boolean incrementalFlag;

    /** Incremental decoding (the default) rather than full recompute. */
    boolean incremental;

    @Option(names = "--dump-cache-trace", paramLabel = "DIR", description = "write expert_trace.bin and expert_hist.json into DIR")
    Path dumpCacheTrace;

    @Option(names = "--layers", paramLabel = "N", description = "bind only the first N layers (the output is not the real model)")
    Integer layers;

    @Option(names = "--out", paramLabel = "FILE", description = "write the JSON results to FILE (none unless asked)")
    Path out;

    @Option(names = "--report", paramLabel = "FILE", description = "write the run report (plan, STEP table, figures) to FILE instead of stderr")
    Path report;

    @Option(names = "--ignore-eos", description = "generate all --gen tokens: do not stop at the end-of-sequence token")
    boolean ignoreEos;

    @Option(names = "--dump-logits", paramLabel = "PATH", description = "write the V float32 logits of the FIRST step (little-endian, no header)")
    Path dumpLogits;

    @Option(names = "--dump-activations", paramLabel = "DIR", description = "after the run, write k3j's candidate dump (docs/formats.md): every layer "
            + "run alone from the reference dump's inputs (--reference, default the one matching the model), logits and greedy ids; --ids must be the reference's prompt. "
            + "A name ending in .safetensors or .npz writes it as one file")
    Path dumpActivations;

    @Option(names = "--dump-reference", paramLabel = "DIR", description = "after the run, write k3j's results in the reference format (docs/formats.md, "
            + "a k3j-written reference): the reference dump's inputs (--reference, default the one matching the model), every judged array k3j's, under the "
            + "memory plan of the flags; verdicts against it say 'reference: k3j VERSION, not torch'. --ids must be the reference's prompt")
    Path dumpReference;

    @CommandLine.ArgGroup(exclusive = false)
    ReferenceOption reference;

    @Option(names = "--spec", paramLabel = "N", defaultValue = "0", description = "speculative decoding: draft up to N ids (clamped to "
            + "8) from the n-gram history and verify them in one forward; the same ids as without it (greedy, not with --recompute)")
    int specDraft;

    @Option(names = "--kernels", paramLabel = "PATH", defaultValue = "adaptive", description = "kernel path: adaptive (the Vector API for "
            + "large calls, scalar for small ones), vector or scalar; the same bits either way (default ${DEFAULT-VALUE})")
    String kernels;

    private Mxfp4.Codes codes;

    @Option(names = "--expert-codes", paramLabel = "FORM", defaultValue = "nibbles", description = "how routed experts are held for the "
            + "MXFP4 kernel: nibbles (as stored, a table lookup per code) or int8 (every code predecoded at load: twice the expert bytes "
            + "in RAM, a faster kernel); the same bits either way (default ${DEFAULT-VALUE})")
    String expertCodes;

    @Option(names = "--logprobs", paramLabel = "N", description = "write each generated id's logprob and its N (0..20) most likely alternatives "
            + "to --out (\"logprobs\"), by the log-softmax k3 serve reports with")
    Integer logprobs;

    @Option(names = "--tf-check", description = "teacher-forced agreement over the --ids sequence in one forward (needs >= 2 ids); "
            + "writes {tf_positions, tf_matches, tf_agreement} to --out")
    boolean tfCheck;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    @Option(names = "--no-trunk-crc", description = "skip the CRC-32C check of each streamed layer against trunk.json (on by default: a "
            + "mismatch is RUN INVALID, exit 4)")
    boolean noTrunkCrc;

    /**
     * The checks of the flags alone that need no model: the memory flags' ranges, the ids' syntax, the output
     * folders (refused before the model is read, so no token is printed for a run whose results would be lost).
     * The CLI fuzz target calls it too.
     */
    void checkFlags() {
        memory.validate();
        if (logprobs != null && (logprobs < 0 || logprobs > 20)) throw usage("--logprobs must be 0 to 20, got " + logprobs);
        if (logprobs != null && (specDraft > 0 || text.chat || out == null)) throw usage("--logprobs writes to --out, without --spec or --chat");
        try {
            if (ids != null) RunPrompt.parseIds(ids);
        } catch (NumberFormatException e) {
            throw usage("--ids: " + e.getMessage());
        }
        try {
            files();
        } catch (IOException e) {
            throw usage(e.getMessage());
        }
    }

    /**
     * Every file the run reads and writes, checked as one set (docs/files.md): no output is a device, an input
     * or another output's file. --history is read and rewritten (its one role); --save-state may replace the
     * --load-state it continues.
     */
    private k3j.io.Outputs files() throws IOException {
        Path m = model != null ? model.path : null;
        if (m != null && Files.isRegularFile(m)) m = m.toAbsolutePath().getParent();
        k3j.io.Outputs f = new k3j.io.Outputs().input(m, "a file of the model folder").input(config, "--config").input(promptFile, "--prompt-file")
                .input(text.tok(), "a tokenizer file (--tok)").input(memory.trunk, "a file of the trunk (--trunk)")
                .input(ReferenceOption.of(reference), "the reference (--reference)")
                .input(text.loadState, "--load-state", "state").input(text.history, "--history", "history");
        f.file(out, "--out");
        f.file(report, "--report");
        f.file(dumpLogits, "--dump-logits");
        f.file(text.saveState, "--save-state", "state");
        if (text.chat) f.file(text.history, "--history", "history");
        if (dumpCacheTrace != null) {
            k3j.io.Outputs.checkFolder(dumpCacheTrace, "--dump-cache-trace");
            if (Files.isDirectory(dumpCacheTrace)) {   // a new folder is created and holds nothing yet
                f.file(dumpCacheTrace.resolve(CacheTrace.TRACE_FILE), "--dump-cache-trace");
                f.file(dumpCacheTrace.resolve(CacheTrace.HIST_FILE), "--dump-cache-trace");
            }
        }
        String name = dumpActivations == null || dumpActivations.getFileName() == null ? "" : dumpActivations.getFileName().toString().toLowerCase(Locale.ROOT);
        if (name.endsWith(".safetensors") || name.endsWith(".npz")) f.file(dumpActivations, "--dump-activations");   // a one-file candidate
        else f.folder(dumpActivations, "--dump-activations");
        f.folder(dumpReference, "--dump-reference");
        return f;
    }

    /**
     * stdout carries the output alone (the generated text, or the ids without a tokenizer; chat: the conversation),
     * so it can be piped; the run report goes to stderr, or to --report FILE.
     */
    @Override
    public Integer call() throws IOException {
        PrintWriter err = spec.commandLine().getErr();
        if (report == null) return call(err, err);
        java.io.StringWriter buffer = new java.io.StringWriter();
        PrintWriter o = new PrintWriter(buffer);
        int rc = call(o, err);
        o.flush();
        AtomicWrite.string(report, "--report", buffer.toString());
        return rc;
    }

    private int call(PrintWriter o, PrintWriter err) throws IOException {
        Path modelDir = model.folder();
        checkFlags();
        // 1. flag conflicts, prompt sources
        int sources = (ids != null ? 1 : 0) + (prompt != null ? 1 : 0) + (promptFile != null ? 1 : 0);
        if (sources == 0 && !text.chat) throw usage("one of --ids, --prompt or --prompt-file is required");
        if (sources > 1) throw usage("--ids, --prompt and --prompt-file are mutually exclusive");
        if (recompute && incrementalFlag) throw usage("--recompute and --incremental are mutually exclusive");
        incremental = !recompute;
        Path tokDir = tokenizerFolder(modelDir);
        if (ids == null && tokDir == null) {
            throw usage((text.chat ? "--chat" : prompt != null ? "--prompt" : "--prompt-file") + " needs --tok DIR (tiktoken.model + tokenizer_config.json): "
                    + modelDir + " holds no " + k3j.tokenizer.Tokenizer.RANKS_FILE);
        }
        if (text.chat && (ids != null || promptFile != null)) throw usage("--chat takes its messages from stdin or --prompt, not --ids or --prompt-file");
        if (text.chatOnlyWithoutChat() != null) throw usage(text.chatOnlyWithoutChat() + " needs --chat (it applies only to a conversation; without --chat it would be ignored)");
        if ((text.saveState != null || text.loadState != null) && !incremental && !text.chat) {
            throw usage((text.saveState != null ? "--save-state" : "--load-state") + " needs incremental decoding, not --recompute (a state is what incremental decoding carries)");
        }
        if (tfCheck && (text.loadState != null || text.chat)) throw usage("--tf-check runs on --ids alone");
        if (text.loadState != null) {
            try {
                k3j.io.SafeFiles.requireRegular(text.loadState, "a state file (--load-state)");
            } catch (IOException e) {
                throw usage(k3j.io.SafeFiles.why(e));
            }
        }
        k3j.sample.Sampler.Settings sampling;
        k3j.chat.Thinking thinking;
        try {
            sampling = text.sampling();
            thinking = text.thinking();
        } catch (IllegalArgumentException e) {
            throw usage(e.getMessage());
        }
        if (specDraft < 0) throw usage("--spec must be >= 0, got " + specDraft);
        if (specDraft > 0 && (!incremental || text.chat)) throw usage("--spec needs incremental decoding, not --recompute (it verifies drafts against the carried state), outside --chat");
        if (specDraft > 0 && !sampling.greedy()) throw usage("--spec is greedy-exact only: it cannot be combined with sampling");
        if (ignoreEos && text.chat) throw usage("--ignore-eos is for generation: a chat reply ends at the end of its message");
        if (text.chat && recompute) throw usage("--recompute is for generation: a chat carries its state from turn to turn");
        int workers = threads.count();
        KernelPath.Mode kernelPath;
        try {
            kernelPath = KernelPath.Mode.parse(kernels);
        } catch (IllegalArgumentException e) {
            throw usage("--kernels: " + e.getMessage());
        }
        try {
            codes = Mxfp4.Codes.parse(expertCodes);
        } catch (IllegalArgumentException e) {
            throw usage("--expert-codes: " + e.getMessage());
        }
        // 2. budgets (the auto budget measures the machine)
        MemInfo mem = memInfo();
        MemoryOptions.Budgets budgets = memory.budgets(mem, o::println);
        // 3. config
        ModelConfig cfg;
        try {
            cfg = ConfigReader.read(config != null ? config : model.config());
        } catch (ConfigException e) {
            err.println("ABORTED: " + e.getMessage());
            return ExitCode.USAGE;
        }
        if (layers != null && (layers < 1 || layers > cfg.layerCount())) throw usage("--layers must be 1.." + cfg.layerCount() + ", got " + layers);
        int bound = layers == null ? cfg.layerCount() : layers;
        if (bound < cfg.layerCount()) o.printf("NOTE: binding only %d of %d layers: the output is NOT the real model%n", bound, cfg.layerCount());
        // 4. prompt ids (text: through the tokenizer; chat: the first turn's rendering, for the plan)
        RunPrompt prompted;
        try {
            prompted = RunPrompt.of(this, tokDir, thinking, cfg.vocabSize());
        } catch (k3j.tokenizer.TokenizerException | k3j.chat.ChatException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.RUNTIME;
        } catch (NumberFormatException e) {
            throw usage("--ids: " + e.getMessage());
        }
        k3j.tokenizer.Tokenizer tokenizer = prompted.tokenizer();
        k3j.chat.Transcript history = prompted.history();
        int[] promptIds = prompted.ids();
        if (promptIds.length == 0) throw usage("no prompt ids parsed");
        if (tfCheck && promptIds.length < 2) throw usage("--tf-check needs at least 2 ids");
        for (int id : promptIds) if (id < 0 || id >= cfg.vocabSize()) throw usage("token id " + id + " is outside the vocabulary of " + cfg.vocabSize());
        ReferenceDump activationsReference = null;
        if (dumpActivations != null && dumpReference != null) throw usage("--dump-activations and --dump-reference: one dump per run");
        if (dumpReference != null && layers != null) throw usage("--dump-reference runs every layer: not with --layers");
        if (dumpActivations != null && (memory.streamed() || layers != null))
            throw usage("--dump-activations runs every layer resident from the reference's inputs: not with --trunk or --layers");
        if (dumpReference != null || dumpActivations != null) {
            try {
                activationsReference = ActivationDump.reference(modelDir, ReferenceOption.of(reference), promptIds);
            } catch (IllegalArgumentException e) {
                throw usage(e.getMessage());
            } catch (ConformException e) {
                err.println("k3: " + e.getMessage());
                return ExitCode.RUNTIME;
            }
        } else if (reference != null) {
            throw usage("--reference names the dump for --dump-activations or --dump-reference");
        }
        // 5. limits
        if (gen < 0 || gen > MAX_GEN) throw usage("--gen must be 0.." + MAX_GEN + ", got " + gen);
        if (gen == 0 && (text.saveState != null || text.chat)) throw usage((text.chat ? "--chat" : "--save-state") + " needs --gen >= 1");
        if (promptIds.length > MAX_PROMPT) throw usage("the prompt has " + promptIds.length + " ids, at most " + MAX_PROMPT);
        if (promptIds.length + gen + 1 > MAX_POSITIONS) throw usage("prompt + gen + 1 = " + (promptIds.length + gen + 1) + " positions, at most " + MAX_POSITIONS);
        if (cfg.maxPositions() > 0 && promptIds.length + gen > cfg.maxPositions()) {
            throw usage("prompt + gen = " + (promptIds.length + gen) + " positions, but the config's max_position_embeddings is " + cfg.maxPositions());
        }
        // 6. incremental KV check (refused here, before the banner; its line is printed with the banner)
        String kvLine = null;
        if (incremental) {
            MemoryPlan kvOnly = MemoryPlan.of(cfg, false, 0, 0, false, 0, true, promptIds.length, gen);
            kvLine = String.format(Locale.ROOT, "  KV cache : %s for %d positions (%.2f MB/position)", Human.bytes(kvOnly.kvCache()), kvOnly.positions(),
                    kvOnly.kvCache() / 1e6 / kvOnly.positions());
            var refused = kvOnly.kvRefusal(mem);
            if (refused.isPresent()) {
                err.println(refused.get().message());
                return refused.get().exitCode();
            }
        }
        // 7. banner
        RunGeneration generation = new RunGeneration(this, new RunGeneration.Session(tokenizer, history, sampling, thinking), o, err);
        generation.banner(modelDir, promptIds.length, budgets, kvLine);
        // 8.-10. index, binding (once), sizes, the memory plan from the model's own sizes, loading
        k3j.api.Plan plan = memory.plan(budgets);
        k3j.api.Engine.Options opts = k3j.api.Engine.Options.DEFAULTS.withThreads(workers).withLayers(bound).withCodes(k3j.api.ExpertCodes.valueOf(codes.name())).withKernels(k3j.api.Kernels.valueOf(kernelPath.name()))
                .withTrunkCrc(!noTrunkCrc).withCacheTrace(dumpCacheTrace != null).plannedFor(promptIds.length, gen, incremental)
                .withMemory(new k3j.api.MachineMemory(mem.totalBytes(), mem.availableBytes())).withReport(s -> {
                    o.print(s);
                    o.flush();
                }, err::println);
        int rc;
        try (k3j.api.Engine engine = ApiInternals.get().open(modelDir, cfg, plan, opts, tokenizer, intercepts)) {
            rc = generation.run(engine, promptIds);
        } catch (k3j.api.Engine.OpenException e) {
            return openFailed(e, err);
        }
        if (rc == ExitCode.OK && dumpReference != null) return ActivationDump.writeReference(o, err, memory, modelDir, activationsReference, dumpReference, workers);
        if (rc != ExitCode.OK || dumpActivations == null) return rc;
        return ActivationDump.write(o, err, modelDir, activationsReference, dumpActivations, workers);
    }

    /**
     * --tok, or for text input (--prompt, --prompt-file, --chat) the model folder when it holds a tokenizer; null for
     * ids without --tok (their output stays ids).
     */
    private Path tokenizerFolder(Path modelDir) {
        if (text.tok() != null) return text.tok();
        if (ids != null || !Files.isRegularFile(modelDir.resolve(k3j.tokenizer.Tokenizer.RANKS_FILE))) return null;
        return modelDir;
    }

    static MemInfo memInfo() {
        String p = System.getProperty(MEM_AVAILABLE_PROPERTY, "");
        if (!p.isBlank()) return new MemInfo(OptionalLong.empty(), OptionalLong.of(Long.parseLong(p.trim())));
        return MemInfo.read();
    }


    /** An engine that did not open: a memory plan that does not fit is printed as the plan says it, anything else named. */
    static int openFailed(k3j.api.Engine.OpenException e, PrintWriter err) {
        err.println(e.planRefused() ? e.getMessage() : "k3: " + e.getMessage());
        return ExitCode.RUNTIME;
    }
}
