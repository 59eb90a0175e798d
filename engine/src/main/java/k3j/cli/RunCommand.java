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
import java.util.OptionalLong;
import java.util.concurrent.Callable;
import k3j.api.internal.ApiInternals;
import k3j.cache.CacheStats;
import k3j.cache.CacheTrace;
import k3j.cache.ExpertCache;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.dump.ReferenceDump;
import k3j.io.AtomicWrite;
import k3j.kernels.KernelPath;
import k3j.kernels.Mxfp4;
import k3j.model.Assembly;
import k3j.model.CorruptWeightsException;
import k3j.model.ExpertDropException;
import k3j.model.Forward;
import k3j.model.ForwardException;
import k3j.model.StreamedTables;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;
import k3j.trunk.TrunkStats;
import k3j.trunk.TrunkStream;
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
    private static final java.util.regex.Pattern ASCII_ID = java.util.regex.Pattern.compile("[0-9]{1,10}");

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
    private boolean incremental;

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

    private final List<k3j.api.Serving.TokenLogprob> logprobEntries = new ArrayList<>();

    @Option(names = "--tf-check", description = "teacher-forced agreement over the --ids sequence in one forward (needs >= 2 ids); "
            + "writes {tf_positions, tf_matches, tf_agreement} to --out")
    boolean tfCheck;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    /** What the text options resolved to, for the generation step. */
    private record Session(k3j.tokenizer.Tokenizer tokenizer, k3j.chat.History history, k3j.sample.Sampler.Settings sampling, k3j.chat.Thinking thinking) {}

    private Session session;

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
            if (ids != null) parseIds(ids);
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
        k3j.tokenizer.Tokenizer tokenizer = null;
        k3j.chat.History history = null;
        int[] promptIds;
        try {
            if (tokDir != null) tokenizer = k3j.tokenizer.Tokenizer.load(tokDir);
            if (text.chat) {
                history = text.history != null ? readHistory() : new k3j.chat.History();
                if (text.system != null) {
                    if (history.size() > 0) throw usage("--system starts a conversation; " + text.history + " already holds one (its system message stays)");
                    history.add(k3j.chat.Message.system(text.system));
                }
                if (history.next() != k3j.chat.Role.USER) throw new k3j.chat.ChatException(text.history + ": the history ends with a user message that has no reply");
                k3j.chat.Xtml x = new k3j.chat.Xtml(tokenizer);
                var msgs = new java.util.ArrayList<>(history.messages());
                msgs.add(k3j.chat.Message.user(prompt != null ? prompt : ""));
                promptIds = text.loadState != null ? new int[] {0} : x.encode(x.render(msgs, thinking, true));
            } else {
                promptIds = ids != null ? parseIds(ids)
                        : tokenizer.encode(prompt != null ? prompt.getBytes(java.nio.charset.StandardCharsets.UTF_8) : promptBytes(), true);
            }
        } catch (k3j.tokenizer.TokenizerException | k3j.chat.ChatException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.RUNTIME;
        } catch (NumberFormatException e) {
            throw usage("--ids: " + e.getMessage());
        }
        if (text.chat) {
            for (String t : new String[] {k3j.chat.Xtml.OPEN, k3j.chat.Xtml.CLOSE, k3j.chat.Xtml.SEP, k3j.chat.Xtml.EOM, k3j.chat.Xtml.EOS}) {
                int id = tokenizer.addedId(t).orElse(Integer.MAX_VALUE);
                if (id >= cfg.vocabSize()) throw usage("the tokenizer's " + t + " (id " + id + ") is outside the model's vocabulary of " + cfg.vocabSize());
            }
        }
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
        this.session = new Session(tokenizer, history, sampling, thinking);
        o.println("Kimi K3, Java (k3j), released checkpoint layout");
        o.println("  model    : " + modelDir);
        if (text.chat) {
            o.printf("  chat     : %d message(s) in the history%s; each reply at most %d tokens%n", history.size(),
                    text.loadState != null ? ", continuing the state in " + text.loadState : "", gen);
        } else {
            o.printf("  prompt   : %d tokens, generating at most %d (%s)%n", promptIds.length, gen, incremental ? "incremental" : "full recompute");
        }
        o.println("  sampling : " + samplingLine(sampling, tokenizer));
        if (budgets.presetName() != null) {
            o.printf(Locale.ROOT, "  preset   : %s (trunk %.2f GB / expert cache %.2f GB)%n", budgets.presetName(), budgets.trunkGb(), budgets.cacheGb());
        }
        if (kvLine != null) o.println(kvLine);
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
            rc = generate(o, err, engine, promptIds);
        } catch (k3j.plan.PlanRefused e) {
            err.println(e.getMessage());
            return e.refusal().exitCode();
        } catch (k3j.api.Engine.OpenException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.RUNTIME;
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

    /** Every sampling setting, and where generation stops. */
    private String samplingLine(k3j.sample.Sampler.Settings s, k3j.tokenizer.Tokenizer tok) {
        String how = s.greedy() ? "greedy (temperature 0)"
                : String.format(Locale.ROOT, "temperature %s, top-p %s, top-k %d, seed %d", s.temperature(), s.topP(), s.topK(), s.seed());
        if (specDraft > 0) how += ", speculative drafts of up to " + Math.min(specDraft, k3j.model.Speculative.MAX_DRAFT);
        if (text.chat) return how + "; a reply stops at the end of its message";
        int eos = eosId(tok);
        return how + (ignoreEos ? "; --ignore-eos: all " + gen + " tokens" : eos >= 0 ? "; stops at " + k3j.api.Engine.EOS + " (id " + eos + ")"
                : "; no end-of-sequence stop (ids without --tok)");
    }

    private static int eosId(k3j.tokenizer.Tokenizer tok) {
        return tok == null ? -1 : tok.addedId(k3j.api.Engine.EOS).orElse(-1);
    }

    static MemInfo memInfo() {
        String p = System.getProperty(MEM_AVAILABLE_PROPERTY, "");
        if (!p.isBlank()) return new MemInfo(OptionalLong.empty(), OptionalLong.of(Long.parseLong(p.trim())));
        return MemInfo.read();
    }

    /** The signal that stopped the generation ("SIGINT", "SIGTERM"), or null. */
    private String interrupted;

    private int generate(PrintWriter o, PrintWriter err, k3j.api.Engine engine, int[] promptIds) throws IOException {
        PrintWriter stdout = spec.commandLine().getOut();
        int rc = ExitCode.OK;
        k3j.api.Generated g = null;
        String failure = null;
        Assembly rt = ApiInternals.get().assembly(engine);
        Forward forward = ApiInternals.get().forward(engine);
        ExpertCache cache = rt.cache();
        TrunkStream stream = rt.trunk();
        int bound = rt.layers();
        try {
            if (tfCheck) return teacherForcing(engine, promptIds, stdout, o, err);
            if (text.chat) return chat(engine, err);
            k3j.api.State from = null;
            if (incremental && text.loadState != null) {
                try {
                    from = engine.loadState(text.loadState, promptIds.length + gen + 1);
                } catch (k3j.state.StateException e) {
                    err.println("k3: " + e.getMessage());
                    return ExitCode.USAGE;
                }
                o.printf("resumed %d positions from %s; this prompt continues them%n", from.positions(), text.loadState);
            }
            k3j.sample.Sampler.Settings s = session.sampling();
            k3j.api.Settings settings = new k3j.api.Settings(new k3j.api.Sampling(s.temperature(), s.topP(), s.topK(), s.seed()), gen, !ignoreEos, incremental, specDraft);
            int eos = ignoreEos ? -1 : engine.eos();
            int fedLength = (from != null ? from.pending().length : 0) + promptIds.length;
            StepTable table = new StepTable();
            long[] trunkReadBefore = {stream != null ? stream.stats().readNanos() : 0};
            double[] expertReadSeconds = {0};
            if (cache != null) cache.resetStep();
            Streamed shown = new Streamed(stdout, ApiInternals.get().tokenizer(engine), eos);
            try (StopSignals signals = new StopSignals(line -> {
                err.println(line);
                err.flush();
            })) {
                o.println(StepTable.HEADER);
                o.println(StepTable.RULE);
                o.flush();
                k3j.api.TokenListener progress = (step, id, secs) -> {
                    if (forward.expertDrops() == 0) shown.token(id);   // from the first drop on the ids are corrupt: never shown
                    CacheStats cs = cache != null ? cache.stepStats() : CacheStats.ZERO;
                    boolean last = step == gen - 1 || (eos >= 0 && id == eos);
                    if (cache != null && !last) cache.resetStep();   // the last step's counters stay for the final-step report
                    long trunkRead = stream != null ? stream.stats().readNanos() : 0;
                    double io = (trunkRead - trunkReadBefore[0]) / 1e9 + cs.readSeconds();
                    trunkReadBefore[0] = trunkRead;
                    expertReadSeconds[0] += cs.readSeconds();
                    int fedNow = incremental ? (step == 0 ? fedLength : 1) : fedLength + step;
                    o.println(table.add(new StepTable.Row(step, id, fedNow, secs, 100 * cs.hitRate(), cs.bytesRead(), io)));
                    o.flush();
                };
                g = logprobs == null ? engine.generate(from, promptIds, settings, progress, signals::requested)
                        : engine.generate(from, promptIds, settings, progress, signals::requested, logprobs, logprobEntries::add);
                if (g.stop() == k3j.api.Generated.Stop.INTERRUPTED) {
                    interrupted = signals.name();
                    rc = signals.exitCode();
                }
                if (g.speculation() != null) {
                    var sr = g.speculation();
                    o.printf(Locale.ROOT, "speculative (--spec %d): %d verifying forwards, %d ids drafted, %d accepted (%.1f%%)%n",
                            sr.draftLimit(), sr.verifications(), sr.drafted(), sr.accepted(), 100 * sr.acceptance());
                }
            } catch (ExpertDropException | CorruptWeightsException e) {
                failure = e.getMessage();
                rc = ExitCode.RUN_INVALID;
            } catch (ForwardException e) {
                failure = e.getMessage();
                rc = ExitCode.RUNTIME;
            } catch (InternalError e) {
                // a memory-mapped shard that shrank under the run faults inside a kernel: name the file, never a stack trace
                failure = MappedShards.describeFault(rt.index(), e);
                rc = ExitCode.RUN_INVALID;
            }
            shown.end();
            o.println(table.footer());
            if (interrupted != null) {
                o.printf("stopped: interrupted (%s) after step %d: %d of %d tokens generated, kept below and in --out%n", interrupted, g.ids().length - 1, g.ids().length, gen);
            }
            if (g != null) {
                o.println("generated ids: " + ids(g.ids()));
                if (g.text() != null) o.println("generated text: " + g.text());
                if (text.saveState != null && g.state() != null) {
                    engine.saveState(text.saveState, g.state());
                    o.printf("saved the state (%d positions) to %s%n", g.state().positions(), text.saveState);
                }
                if (dumpLogits != null && g.firstLogits() != null) {
                    float[] l = g.firstLogits();
                    ByteBuffer b = ByteBuffer.allocate(4 * l.length).order(ByteOrder.LITTLE_ENDIAN);
                    b.asFloatBuffer().put(l);
                    AtomicWrite.bytes(dumpLogits, "--dump-logits", b.array());
                    o.printf("wrote %s (%d float32 logits)%n", dumpLogits, l.length);
                }
            }
            if (g != null && g.stop() == k3j.api.Generated.Stop.END_OF_SEQUENCE && rc == ExitCode.OK && forward.expertDrops() == 0) {
                o.printf("stopped at %s after %d of %d tokens%n", k3j.api.Engine.EOS, g.ids().length, gen);
            }
            long peak = MemInfo.peakRss().orElse(0);
            o.printf("PEAK RSS for the whole run: %s   <- quote this, not the plan%n", Human.bytes(peak));
            o.printf("layers completed: %d/%d; routed expert drops: %d%n%n", forward.layersCompleted(), bound, forward.expertDrops());
            if (cache != null) o.print(cache.report(false));
            TrunkStats ts = stream != null ? stream.stats() : null;
            CacheStats total = cache != null ? cache.totalStats() : null;
            if (out != null) {
                trunkBinding = stream != null ? stream.binding() : null;
                writeOut(g, promptIds, bound, forward.layersCompleted(), forward.expertDrops(),
                        total != null ? total.bytesRead() : rt.model().experts().bytesRead(), ts != null ? ts.bytesRead() : 0, peak, rt.tables(), settings, eos);
                o.println("wrote " + out);
            }
            if (dumpCacheTrace != null) {
                Files.createDirectories(dumpCacheTrace);
                o.println(engine.saveCacheTrace(dumpCacheTrace));
            }
            double wall = table.seconds(), trunkSecs = ts != null ? ts.readNanos() / 1e9 : 0;
            o.printf(Locale.ROOT, "I/O share of wall clock: %.1f%%  (trunk %.2f s + experts %.2f s + model tables %.2f s of %.2f s)%n",
                    wall > 0 ? 100 * (trunkSecs + expertReadSeconds[0]) / wall : 0.0, trunkSecs, expertReadSeconds[0], 0.0, wall);
            o.printf("  both figures are WHOLE-RUN totals over %d steps%n", table.rows().size());
            if (wall > 0 && trunkSecs + expertReadSeconds[0] > wall) {
                o.println("  (over 100%: reads on the reader threads overlapped compute)");
            }
            if (total != null) {
                o.printf(Locale.ROOT, "  experts, whole run: %s read | %d of %d requests retained in RAM (%.2f%%) | %d evictions%n",
                        Human.bytes(total.bytesRead()), Math.max(0, total.requests() - total.evictions()), total.requests(),
                        total.requests() == 0 ? 0.0 : 100.0 * Math.max(0, total.requests() - total.evictions()) / total.requests(), total.evictions());
                o.println("  retained = requests - evictions: a request whose expert was not evicted since it was last read was served from RAM;");
                o.println("  the per-step CACHE HIT column counts the batch prefetch as hits, so it is near 100% at every cache size.");
            }
            if (ts != null) o.print(ts.report());
            if (rc == ExitCode.RUN_INVALID && forward.expertDrops() == 0) {
                err.println("RUN INVALID: " + failure + ". No token was produced after it.");
            } else if (rc == ExitCode.RUN_INVALID || forward.expertDrops() > 0) {
                err.println("RUN INVALID: " + forward.expertDrops() + " routed expert load(s) failed and were dropped from the MoE sum. "
                        + "The token ids above are CORRUPT. (" + failure + ")");
                rc = ExitCode.RUN_INVALID;
            } else if (failure != null) {
                err.println("forward pass failed: " + failure + "; aborting.");
            }
        } finally {
            o.flush();
            err.flush();
        }
        return rc;
    }

    /** The chat loop over this run's engine. */
    private int chat(k3j.api.Engine engine, PrintWriter err) throws IOException {
        k3j.sample.Sampler.Settings s = session.sampling();
        k3j.api.Chat chat = engine.chat(new k3j.api.History(session.history().messages().stream().map(m -> new k3j.api.History.Message(
                        k3j.api.History.Role.valueOf(m.role().name()), m.content(), m.reasoning(), m.interrupted())).toList()),
                new k3j.api.Thinking(session.thinking().on(), session.thinking().effort()), new k3j.api.Sampling(s.temperature(), s.topP(), s.topK(), s.seed()));
        ChatLoop loop = new ChatLoop(chat, text, gen, System.out, err);
        try {
            if (text.loadState != null) loop.resume();
            return loop.run(prompt, System.in);
        } catch (k3j.state.StateException | k3j.chat.ChatException e) {
            err.println("k3: " + e.getMessage());
            err.flush();
            return ExitCode.USAGE;
        }
    }

    /** docs/semantics.md §7.1 --tf-check: argmax of every position against the next id, one forward over all ids. */
    private int teacherForcing(k3j.api.Engine engine, int[] ids, PrintWriter stdout, PrintWriter o, PrintWriter err) throws IOException {
        k3j.api.Engine.Agreement r;
        try {
            r = engine.teacherForcing(ids);
        } catch (ExpertDropException | CorruptWeightsException e) {
            err.println("RUN INVALID: " + e.getMessage());
            return ExitCode.RUN_INVALID;
        } catch (ForwardException e) {
            err.println("forward pass failed: " + e.getMessage());
            return ExitCode.RUNTIME;
        } catch (InternalError e) {
            err.println("RUN INVALID: " + MappedShards.describeFault(null, e));
            return ExitCode.RUN_INVALID;
        }
        stdout.printf(Locale.ROOT, "teacher forcing: %d/%d positions agree (%.4f)%n", r.matches(), r.positions(), r.fraction());
        stdout.flush();
        if (out != null) {
            AtomicWrite.string(out, "--out", String.format(Locale.ROOT, "{\"tf_positions\":%d,\"tf_matches\":%d,\"tf_agreement\":%.4f}%n", r.positions(), r.matches(), r.fraction()));
            o.println("wrote " + out);
        }
        return ExitCode.OK;
    }

    /** --history: a file refused by type or size is bad input (exit 2), like any other refused file. */
    private k3j.chat.History readHistory() {
        try {
            k3j.io.SafeFiles.requireSize(text.history, k3j.chat.History.MAX_FILE, "a chat history (--history)");
        } catch (IOException e) {
            // a missing file starts a new conversation
            if (Files.exists(text.history, java.nio.file.LinkOption.NOFOLLOW_LINKS)) throw usage(k3j.io.SafeFiles.why(e));
        }
        return k3j.chat.History.read(text.history);
    }

    /** A --prompt-file larger than this could never fit the position limit: refused unread. */
    static final long MAX_PROMPT_BYTES = 16L << 20;

    private byte[] promptBytes() {
        try {
            return k3j.io.SafeFiles.readAll(promptFile, MAX_PROMPT_BYTES, "a prompt (--prompt-file)");
        } catch (IOException e) {
            throw usage(k3j.io.SafeFiles.why(e));
        }
    }

    private static String ids(int[] ids) {
        StringBuilder sb = new StringBuilder();
        for (int id : ids) sb.append(sb.isEmpty() ? "" : ",").append(id);
        return sb.toString();
    }

    /** The ids of {@code s}, separated by ',' or spaces; a part that is not an integer is refused. */
    static int[] parseIds(String s) {
        List<Integer> l = new ArrayList<>();
        for (String part : s.trim().split("[,\\s]+")) {
            if (part.isEmpty()) continue;
            try {
                // ASCII digits only: Integer.parseInt reads "١٢" (Arabic-Indic) as 12
                if (!ASCII_ID.matcher(part).matches()) throw new NumberFormatException(part);
                l.add(Integer.parseInt(part));
            } catch (NumberFormatException e) {
                throw new NumberFormatException("'" + part + "' is not an integer token id");
            }
        }
        return l.stream().mapToInt(Integer::intValue).toArray();
    }

    private void writeOut(k3j.api.Generated g, int[] promptIds, int bound, int completed, long drops, long expertBytes, long trunkBytes, long peak,
                          StreamedTables tables, k3j.api.Settings settings, int eos) throws IOException {
        int[] generated = g == null ? new int[0] : g.ids();
        double wall = g == null ? 0 : g.seconds();
        String generatedText = g != null ? g.text() : null;
        String stopped = g == null ? null : switch (g.stop()) {
            case END_OF_SEQUENCE -> "eos";
            case MAX_TOKENS -> "max_tokens";
            case INTERRUPTED -> "interrupted";
        };
        AtomicWrite.write(out, "--out", os -> writeJson(os, promptIds, generated, wall, bound, completed, drops, expertBytes, trunkBytes, peak, generatedText, tables,
                settings, eos, stopped, trunkBinding, logprobs == null ? null : logprobEntries));
    }

    /** What the streamed trunk's data binding check did at open (null: the trunk is resident). */
    private k3j.trunk.DataBinding.Result trunkBinding;

    private static void writeJson(OutputStream os, int[] promptIds, int[] generated, double wall, int bound, int completed, long drops,
                                  long expertBytes, long trunkBytes, long peak, String generatedText, StreamedTables tables,
                                  k3j.api.Settings settings, int eos, String stopped, k3j.trunk.DataBinding.Result binding,
                                  List<k3j.api.Serving.TokenLogprob> logprobs) throws IOException {
        try (JsonGenerator j = new JsonFactory().createGenerator(os, JsonEncoding.UTF8)) {
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
            j.writeNumberField("peak_rss_bytes", peak);
            j.writeFieldName("wall_seconds");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", wall));
            j.writeFieldName("seconds_per_token");
            j.writeRawValue(String.format(Locale.ROOT, "%.4f", generated.length == 0 ? 0.0 : wall / generated.length));
            j.writeNumberField("expert_bytes_read", expertBytes);
            j.writeNumberField("trunk_bytes_read", trunkBytes);
            j.writeNumberField("embedding_bytes_read", tables != null ? tables.embeddingBytesRead() : 0);
            j.writeNumberField("lm_head_bytes_read", tables != null ? tables.lmHeadBytesRead() : 0);
            j.writeBooleanField("ultra_low_memory", tables != null);
            if (binding != null) {
                j.writeObjectFieldStart("trunk_binding");
                j.writeStringField("check", binding.mode().flag());
                j.writeNumberField("shards_changed_since_pack", binding.changedShards().size());
                j.writeNumberField("tensors_hashed", binding.tensorsHashed());
                j.writeNumberField("bytes_hashed", binding.bytesHashed());
                j.writeEndObject();
            }
            if (generatedText != null) j.writeStringField("generated_text", generatedText);
            else j.writeNullField("generated_text");
            j.writeObjectFieldStart("sampling");
            j.writeNumberField("temperature", settings.sampling().temperature());
            j.writeNumberField("top_p", settings.sampling().topP());
            j.writeNumberField("top_k", settings.sampling().topK());
            j.writeNumberField("seed", settings.sampling().seed());
            j.writeEndObject();
            j.writeNumberField("max_tokens", settings.maxTokens());
            j.writeBooleanField("incremental", settings.incremental());
            j.writeNumberField("speculative", settings.speculative());
            j.writeBooleanField("stop_at_eos", settings.stopAtEos());
            if (eos >= 0) j.writeNumberField("eos_id", eos);
            else j.writeNullField("eos_id");
            if (stopped != null) j.writeStringField("stopped", stopped);
            else j.writeNullField("stopped");
            j.writeNumberField("steps", generated.length);
            if (logprobs != null) {
                j.writeArrayFieldStart("logprobs");   // float32 values, written as their shortest decimal
                for (k3j.api.Serving.TokenLogprob t : logprobs) {
                    j.writeStartObject();
                    j.writeNumberField("id", t.id());
                    j.writeNumberField("logprob", t.logprob());
                    j.writeFieldName("top_ids");
                    j.writeArray(t.topIds(), 0, t.topIds().length);
                    j.writeArrayFieldStart("top_logprobs");
                    for (float f : t.topLogprobs()) j.writeNumber(f);
                    j.writeEndArray();
                    j.writeEndObject();
                }
                j.writeEndArray();
            }
            j.writeEndObject();
        }
    }
}
