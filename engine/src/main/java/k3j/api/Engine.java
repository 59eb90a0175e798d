package k3j.api;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.function.Consumer;
import java.util.function.IntPredicate;
import k3j.cache.CacheTrace;
import k3j.chat.Thinking;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.kernels.Argmax;
import k3j.kernels.Mxfp4;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.Speculative;
import k3j.plan.MemoryPlan;
import k3j.sample.Sampler;
import k3j.state.Binding;
import k3j.state.StateFile;
import k3j.tokenizer.Tokenizer;

/**
 * A model opened under a memory plan, ready to generate: checkpoint index → binding → memory plan (refused with
 * a RuntimeException that says what does not fit, before anything large is allocated) → the model, the streamed trunk,
 * the streamed tables and the expert cache the plan asks for → a forward on {@code threads} workers.
 *
 * <pre>{@code
 * try (Engine k3 = Engine.open(Path.of("oracle-fixtures/tiny-k3"), Plan.resident())) {
 *     Generated g = k3.generate("hello", Settings.greedy(8), TokenListener.NONE);
 *     System.out.println(g.text());
 * }
 * }</pre>
 *
 * What it does along the way (the index, the plan block, what was opened) goes to {@link Options#report()}, one
 * piece of text at a time, as {@code k3 run} prints it.
 */
public final class Engine implements AutoCloseable {
    /** The end-of-sequence token of the K3 tokenizer. */
    public static final String EOS = "[EOS]";

    /**
     * How to open.
     *
     * @param threads            worker threads of the forward
     * @param layers             the decoder layers to bind, counted from the first (-1: all)
     * @param codes              how the routed experts' codes are held for the kernels
     * @param kernels            the kernel path
     * @param trunkCrc           whether a streamed trunk's reads are checked against their CRC32
     * @param cacheTrace         whether the expert cache records which experts each token routed to ({@link Engine#saveCacheTrace})
     * @param tokenizer          the folder of the tokenizer (tiktoken.model and tokenizer_config.json), or null: none
     * @param plannedPrompt      the prompt positions the memory plan is made for
     * @param plannedTokens      the generated positions the memory plan is made for
     * @param plannedIncremental whether the plan holds a KV cache (incremental decoding)
     * @param memory             the machine's memory the plan must fit (null: read /proc/meminfo)
     * @param report             where the open's report goes (the index, the plan block, what was opened), a piece of text at a time
     * @param notes              where the trunk's and the cache's notes go
     */
    public record Options(int threads, int layers, ExpertCodes codes, Kernels kernels, boolean trunkCrc, boolean cacheTrace, Path tokenizer,
                          int plannedPrompt, int plannedTokens, boolean plannedIncremental, MachineMemory memory,
                          Consumer<String> report, Consumer<String> notes) {
        /** Every processor, every layer, nibble codes, the adaptive kernel path, CRCs checked, no tokenizer, a plan for 512 + 512 positions, nothing reported. */
        public static final Options DEFAULTS = new Options(Runtime.getRuntime().availableProcessors(), -1, ExpertCodes.NIBBLES, Kernels.ADAPTIVE,
                true, false, null, 512, 512, true, null, s -> {}, s -> {});

        /**
         * These options on {@code n} worker threads.
         *
         * @param n the worker threads
         * @return a copy of these options with that change
         */
        public Options withThreads(int n) {
            return new Options(n, layers, codes, kernels, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options binding the first {@code n} decoder layers only (-1: all).
         *
         * @param n the layers to bind, or -1 for all
         * @return a copy of these options with that change
         */
        public Options withLayers(int n) {
            return new Options(threads, n, codes, kernels, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options holding the experts' codes as {@code c}.
         *
         * @param c the codes' form
         * @return a copy of these options with that change
         */
        public Options withCodes(ExpertCodes c) {
            return new Options(threads, layers, c, kernels, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options on the kernel path {@code k}.
         *
         * @param k the kernel path
         * @return a copy of these options with that change
         */
        public Options withKernels(Kernels k) {
            return new Options(threads, layers, codes, k, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options with a streamed trunk's CRC32 checks on or off.
         *
         * @param on whether the CRC32s are checked
         * @return a copy of these options with that change
         */
        public Options withTrunkCrc(boolean on) {
            return new Options(threads, layers, codes, kernels, on, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options recording the experts each token routed to, or not.
         *
         * @param on whether the expert trace is recorded
         * @return a copy of these options with that change
         */
        public Options withCacheTrace(boolean on) {
            return new Options(threads, layers, codes, kernels, trunkCrc, on, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * These options with the tokenizer in {@code dir} (tiktoken.model and tokenizer_config.json).
         *
         * @param dir the tokenizer's folder
         * @return a copy of these options with that change
         */
        public Options withTokenizer(Path dir) {
            return new Options(threads, layers, codes, kernels, trunkCrc, cacheTrace, dir, plannedPrompt, plannedTokens, plannedIncremental, memory, report, notes);
        }

        /**
         * The plan is made for {@code prompt} + {@code tokens} positions, with a KV cache when {@code incremental}.
         *
         * @param prompt the prompt's positions
         * @param tokens the positions generated
         * @param incremental whether a KV cache is planned
         * @return a copy of these options with that change
         */
        public Options plannedFor(int prompt, int tokens, boolean incremental) {
            return new Options(threads, layers, codes, kernels, trunkCrc, cacheTrace, tokenizer, prompt, tokens, incremental, memory, report, notes);
        }

        /**
         * The machine's memory the plan must fit (null: read /proc/meminfo).
         *
         * @param m the memory, or null: this machine's
         * @return a copy of these options with that change
         */
        public Options withMemory(MachineMemory m) {
            return new Options(threads, layers, codes, kernels, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, m, report, notes);
        }

        /**
         * Where the open's report goes (the index, the plan block, what was opened), and the notes of the trunk and the cache.
         *
         * @param r the report's sink
         * @param n the notes' sink
         * @return a copy of these options with that change
         */
        public Options withReport(Consumer<String> r, Consumer<String> n) {
            return new Options(threads, layers, codes, kernels, trunkCrc, cacheTrace, tokenizer, plannedPrompt, plannedTokens, plannedIncremental, memory, r, n);
        }
    }

    /** Opening failed at a named stage (tokenizer, config, index, binding, memory plan, trunk, model tables, expert cache); the message says what and where. */
    public static final class OpenException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        /** Whether opening stopped at the memory plan. */
        private final boolean planRefused;

        OpenException(String stage, Exception cause) {
            super((stage.isEmpty() ? "" : stage + ": ") + cause.getMessage(), cause);
            this.planRefused = false;
        }

        /** The memory plan's refusal: its message as the plan words it. */
        OpenException(k3j.plan.MemoryPlan.Refusal refusal) {
            super(refusal.message());
            this.planRefused = true;
        }

        /** {@return whether opening stopped at the memory plan: the machine's memory does not hold what it asks for, and nothing large was allocated} */
        public boolean planRefused() {
            return planRefused;
        }
    }

    /**
     * Teacher forcing: at how many of the positions the argmax is the next id.
     *
     * @param positions the positions compared (one fewer than the ids)
     * @param matches the positions whose argmax is the next id
     */
    public record Agreement(int positions, int matches) {
        /**
         * {@return the share of positions whose argmax is the next id}
         */
        public double fraction() {
            return (double) matches / positions;
        }
    }

    private final Assembly assembly;
    private final MemoryPlan plan;
    private final Tokenizer tokenizer;
    private final CacheTrace trace;
    private final Workers workers;
    private final Forward forward;

    Engine(Assembly assembly, MemoryPlan plan, Tokenizer tokenizer, CacheTrace trace, Workers workers, Mxfp4.Codes codes) {
        this.assembly = assembly;
        this.plan = plan;
        this.tokenizer = tokenizer;
        this.trace = trace;
        this.workers = workers;
        this.forward = assembly.forward(workers);
        forward.expertCodes(codes);
    }

    /**
     * The model in {@code modelDir} (its config.json, and its tokenizer when it has one) under {@code plan}, with the default options.
     *
     * @param modelDir the model folder
     * @param plan how the weights are held
     * @return the engine; close it
     */
    public static Engine open(Path modelDir, Plan plan) {
        boolean tok = java.nio.file.Files.isRegularFile(modelDir.resolve(Tokenizer.RANKS_FILE));
        return open(modelDir, plan, tok ? Options.DEFAULTS.withTokenizer(modelDir) : Options.DEFAULTS);
    }

    /**
     * The model in {@code modelDir} (its config.json) under {@code plan}, with the options {@code options}.
     *
     * @param modelDir the model folder
     * @param plan how the weights are held
     * @param options how to open
     * @return the engine; close it
     */
    public static Engine open(Path modelDir, Plan plan, Options options) {
        Tokenizer t;
        ModelConfig config;
        try {
            t = options.tokenizer() == null ? null : Tokenizer.load(options.tokenizer());
        } catch (k3j.tokenizer.TokenizerException e) {
            throw new OpenException("tokenizer", e);
        }
        try {
            config = ConfigReader.read(modelDir.resolve("config.json"));
        } catch (k3j.config.ConfigException e) {
            throw new OpenException("config", e);
        }
        return open(modelDir, config, plan, options, t, Assembly.Intercepts.NONE);
    }

    /** The model in {@code modelDir} described by {@code config} under {@code plan}, with {@code tokenizer} (already loaded, or null) and I/O {@code intercepts}. */
    static Engine open(Path modelDir, ModelConfig config, Plan plan, Options o, Tokenizer tokenizer, Assembly.Intercepts intercepts) {
        return Opening.open(modelDir, config, plan, o, tokenizer, intercepts);
    }

    Assembly assembly() {
        return assembly;
    }

    MemoryPlan memoryPlan() {
        return plan;
    }

    ModelConfig config() {
        return assembly.config();
    }

    Forward forward() {
        return forward;
    }

    Tokenizer tokenizer() {
        return tokenizer;
    }

    CacheTrace trace() {
        return trace;
    }

    /** {@return the memory plan the engine was opened under} */
    public PlannedMemory plan() {
        return PlannedMemory.of(plan);
    }

    /** {@return the opened model's widths} */
    public ModelShape shape() {
        return ModelShape.of(assembly.config(), assembly.layers());
    }

    /** {@return whether a tokenizer was given (or found in the model folder): {@link #encode}, {@link #decode} and text prompts need one} */
    public boolean hasTokenizer() {
        return tokenizer != null;
    }

    /**
     * Writes the expert trace recorded so far ({@link Options#cacheTrace()}) into the folder {@code dir} and says what was written.
     *
     * @param dir the folder the trace's files go to
     * @return one line naming what was written
     * @throws IOException when the files cannot be written
     */
    public String saveCacheTrace(Path dir) throws IOException {
        if (trace == null) throw new IllegalStateException("no expert trace is recorded: open with Options.withCacheTrace(true)");
        return trace.write(dir);
    }

    /** {@return the id of the end-of-sequence token, or -1 without a tokenizer} */
    public int eos() {
        return tokenizer == null ? -1 : tokenizer.addedId(EOS).orElse(-1);
    }

    /**
     * {@code text} as ids (added tokens such as {@code <|end_of_msg|>} recognised).
     *
     * @param text the text
     * @return its ids
     */
    public int[] encode(String text) {
        return encode(text.getBytes(StandardCharsets.UTF_8));
    }

    /**
     * The UTF-8 bytes {@code text} as ids (added tokens recognised).
     *
     * @param text UTF-8 bytes
     * @return their ids
     */
    public int[] encode(byte[] text) {
        return requireTokenizer().encode(text, true);
    }

    /**
     * Ids as text (ids past the tokenizer's table dropped, bytes that are not UTF-8 shown as U+FFFD).
     *
     * @param ids the ids
     * @return their text
     */
    public String decode(int[] ids) {
        Tokenizer t = requireTokenizer();
        int[] shown = Arrays.stream(ids).filter(id -> id < t.size()).toArray();
        return new String(t.decode(shown), StandardCharsets.UTF_8);
    }

    private Tokenizer requireTokenizer() {
        if (tokenizer == null) throw new IllegalStateException("no tokenizer: open with Options.withTokenizer(DIR)");
        return tokenizer;
    }

    /**
     * Generates after the text {@code prompt}.
     *
     * @param prompt the prompt's text (needs a tokenizer)
     * @param s how to generate
     * @param listener told each token as it is chosen
     * @return what was generated
     */
    public Generated generate(String prompt, Settings s, TokenListener listener) {
        return generate(null, encode(prompt), s, listener);
    }

    /**
     * Generates after the ids {@code prompt}.
     *
     * @param prompt the prompt's ids
     * @param s how to generate
     * @param listener told each token as it is chosen
     * @return what was generated
     */
    public Generated generate(int[] prompt, Settings s, TokenListener listener) {
        return generate(null, prompt, s, listener);
    }

    /**
     * Generates after {@code prompt}, continuing {@code from} (a state loaded or returned earlier; null: a fresh
     * start, incremental or full recompute as {@code s} says). The forward's failures propagate: an expert that
     * could not be loaded or weights found corrupt make the run invalid, never a silently different result.
     *
     * @param from the state to continue, or null
     * @param prompt the ids that follow it
     * @param s how to generate
     * @param listener told each token as it is chosen
     * @return what was generated
     */
    public Generated generate(State from, int[] prompt, Settings s, TokenListener listener) {
        return generate(from, prompt, s, listener, () -> false);
    }

    /**
     * As {@link #generate(State, int[], Settings, TokenListener)}, stopping after the token during which
     * {@code stopRequested} turns true (a signal, a user's stop): the ids generated so far are kept, and the
     * result says {@link Generated.Stop#INTERRUPTED}. At least one token is generated.
     *
     * @param from the state to continue, or null
     * @param prompt the ids that follow it
     * @param s how to generate
     * @param listener told each token as it is chosen
     * @param stopRequested asked after each token; true stops there
     * @return what was generated
     */
    public Generated generate(State from, int[] prompt, Settings s, TokenListener listener, java.util.function.BooleanSupplier stopRequested) {
        return generate(from, prompt, s, listener, stopRequested, 0, null);
    }

    /**
     * As {@link #generate(State, int[], Settings, TokenListener, java.util.function.BooleanSupplier)}, telling
     * {@code logprobs} each generated id with its logprob and its {@code top} most likely alternatives, from the
     * logits that chose it by the one log-softmax {@link Serving} reports with (k3j.sample.Logprobs).
     *
     * @param from the state to continue, or null
     * @param prompt the ids that follow it
     * @param s how to generate (not speculative)
     * @param listener told each token as it is chosen
     * @param stopRequested asked after each token; true stops there
     * @param top the alternatives per id, 0 to 20
     * @param logprobs told each id's logprob entry, in order
     * @return what was generated
     */
    public Generated generate(State from, int[] prompt, Settings s, TokenListener listener, java.util.function.BooleanSupplier stopRequested, int top,
                              java.util.function.Consumer<Serving.TokenLogprob> logprobs) {
        try {
            return generating(from, prompt, s, listener, stopRequested, top, logprobs);
        } catch (k3j.model.ForwardException e) {
            throw new RunFailed(e);
        }
    }

    private Generated generating(State from, int[] prompt, Settings s, TokenListener listener, java.util.function.BooleanSupplier stopRequested, int top,
                                 java.util.function.Consumer<Serving.TokenLogprob> logprobs) {
        if (logprobs != null && (top < 0 || top > 20)) throw new IllegalArgumentException("top logprobs must be 0 to 20, not " + top);
        if (logprobs != null && s.speculative() > 0) throw new IllegalArgumentException("logprobs are reported without speculative decoding");
        if (listener == null) throw new IllegalArgumentException("the token listener is null: pass id -> {} to ignore the tokens as they come");
        if (stopRequested == null) throw new IllegalArgumentException("the stop request is null: pass () -> false to generate until the end");
        if (prompt.length == 0) throw new IllegalArgumentException("no prompt ids");
        int[] fed = prompt, prior = new int[0];
        DecodeState state = null;
        if (from != null) {
            state = from.decode();
            prior = Arrays.copyOf(from.ids(), state.cached());
            fed = concat(from.pending(), prompt);   // the last id of the run saved was never fed
        } else if (s.incremental()) {
            state = forward.newState(Generation.capacity(prompt.length, s.maxTokens()));
        }
        int eos = s.stopAtEos() ? eos() : -1;
        IntPredicate end = id -> eos >= 0 && id == eos;
        IntPredicate stop = id -> end.test(id) || stopRequested.getAsBoolean();
        Generation g;
        Generated.Speculation spec = null;
        if (s.speculative() > 0) {
            if (state == null) throw new IllegalArgumentException("speculative decoding needs an incremental state");
            Speculative.Result r = Speculative.greedy(forward, fed, s.maxTokens(), s.speculative(), state, Speculative.NGRAM, listener::token, stop);
            g = r.generation();
            spec = new Generated.Speculation(Math.min(s.speculative(), Speculative.MAX_DRAFT), r.verifications(), r.drafted(), r.accepted());
        } else {
            Sampler sampler = new Sampler(s.sampling().sampler(), 0);
            g = Generation.run(forward, fed, s.maxTokens(), state, (l, v) -> {
                int id = sampler.next(l, 0, v);
                if (logprobs != null) logprobs.accept(Serving.TokenLogprob.of(l, 0, v, id, top));
                return id;
            }, false, listener::token, stop);
        }
        int[] ids = g.generated();
        Generated.Stop why = ids.length > 0 && end.test(ids[ids.length - 1]) ? Generated.Stop.END_OF_SEQUENCE
                : ids.length < s.maxTokens() ? Generated.Stop.INTERRUPTED : Generated.Stop.MAX_TOKENS;
        State after = state == null ? null : new State(concat(prior, concat(fed, ids)), state);
        int[] shown = why == Generated.Stop.END_OF_SEQUENCE ? Arrays.copyOf(ids, ids.length - 1) : ids;   // the text ends before the end of sequence
        return new Generated(prompt.clone(), ids, tokenizer != null ? decode(shown) : null, why, g.stepSeconds(),
                g.stepLogits().isEmpty() ? null : g.stepLogits().get(0), after, spec);
    }

    /**
     * Writes {@code state} to {@code file} (bound to these weights: refused when loaded into others).
     *
     * @param file the state file to write
     * @param state the state, from {@link #generate} or {@link #loadState}
     */
    public void saveState(Path file, State state) {
        try {
            StateFile.save(file, binding(), new byte[32], state.ids(), state.decode());
        } catch (k3j.state.StateException e) {
            throw new StateRefused(e);
        }
    }

    /** The most positions a run or a chat holds in all, whatever the config says. */
    public static final int MAX_POSITIONS = 36864;

    /** {@return the positions this model may hold: the config's max_position_embeddings when it gives one, at most {@link #MAX_POSITIONS}} */
    public int maxPositions() {
        int c = config().maxPositions();
        return c > 0 ? Math.min(c, MAX_POSITIONS) : MAX_POSITIONS;
    }

    /** {@return where {@link #maxPositions} comes from, for refusals} */
    public String maxPositionsSource() {
        int c = config().maxPositions();
        return c > 0 && c <= MAX_POSITIONS ? "positions of the config's max_position_embeddings" : "positions a run may hold";
    }

    /**
     * The state saved in {@code file}, with room for {@code room} more positions. Refused ({@link StateRefused}) for other
     * weights, and before anything is sized from its header when its ids and the room pass {@link #maxPositions}.
     *
     * @param file the state file
     * @param room positions to hold beyond the saved ones
     * @return the state, ready to continue with {@link #generate(State, int[], Settings, TokenListener)}
     */
    public State loadState(Path file, int room) {
        try {
            DecodeState st = forward.newState(StateFile.idCount(file, maxPositions() - room, "this model may still hold beside " + room + " more (the "
                    + maxPositions() + " " + maxPositionsSource() + ")") + room);
            int[] ids = StateFile.load(file, binding(), st).ids();
            return new State(ids, st);
        } catch (k3j.state.StateException e) {
            throw new StateRefused(e);
        }
    }

    /** The binding a state file is tied to: the architecture and the checkpoint's weights. */
    Binding binding() {
        return Binding.of(assembly.config(), assembly.layers(), assembly.index(), assembly.trunk() != null ? assembly.trunk().manifest() : null);
    }

    /**
     * The [ids.length, V] logits of one teacher-forced forward over {@code ids} (row t: after ids[0..t]).
     *
     * @param ids the ids, at least one
     * @return the logits, row by row
     */
    public float[] teacherForcedLogits(int[] ids) {
        if (ids.length < 1) throw new IllegalArgumentException("teacher forcing needs at least 1 id");
        try {
            return forward.full(ids, true, null).logits();
        } catch (k3j.model.ForwardException e) {
            throw new RunFailed(e);
        }
    }

    /**
     * Teacher forcing over {@code ids} in one forward: the argmax at every position against the next id.
     *
     * @param ids the ids, at least two
     * @return the agreement
     */
    public Agreement teacherForcing(int[] ids) {
        if (ids.length < 2) throw new IllegalArgumentException("teacher forcing needs at least 2 ids");
        Forward.Result r;
        try {
            r = forward.full(ids, true, null);
        } catch (k3j.model.ForwardException e) {
            throw new RunFailed(e);
        }
        int v = forward.weights().lmHead().rows(), positions = ids.length - 1, matches = 0;
        for (int t = 0; t < positions; t++) if (Argmax.fast(r.logits(), t * v, v) == ids[t + 1]) matches++;
        return new Agreement(positions, matches);
    }

    /**
     * A chat over this engine (needs a tokenizer with the K3 chat markers).
     *
     * @param history the conversation so far (a system message, or earlier turns)
     * @param thinking the thinking channel
     * @param sampling how each reply's ids are drawn
     * @return the chat
     */
    public Chat chat(History history, Thinking thinking, Sampling sampling) {
        return new Chat(this, history, thinking, sampling);
    }

    static int[] concat(int[] a, int[] b) {
        int[] out = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    /** Frees the engine's memory and threads; a second call does nothing. */
    @Override
    public void close() {
        if (closed.getAndSet(true)) return;
        try (assembly) {
            workers.close();
        }
    }
}
