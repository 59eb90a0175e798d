package k3j.api;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import k3j.model.BatchStep;
import k3j.model.DecodeState;
import k3j.sample.Sampler;

/**
 * {@link Serving} on one batch thread: a bounded queue, up to {@link Serving.Limits#maxActive()} sequences in slots,
 * and per step one {@link BatchStep} over every active sequence (a prefill chunk of at most
 * {@link Serving.Limits#prefillChunk()} ids, or its last generated id). Sequences join and leave between steps; a
 * cancelled one leaves before the next step. A request is checked whole when it is submitted, so nothing it carries can
 * fail a step; a sink that throws ends its own sequence ({@link Serving.Finish#ERROR}), and a step that fails (the
 * weights could not be read) ends the sequences of that step, never the thread.
 */
final class Batcher implements Serving {
    /** Steps the tokens-per-second figure is taken over. */
    private static final int RATE_WINDOW = 16;

    private final BatchStep step;
    private final Limits limits;
    private final int vocab, eos;
    private final Object lock = new Object();
    private final ArrayDeque<Sequence> queue = new ArrayDeque<>();
    private final List<Sequence> active = new ArrayList<>();
    private final Thread thread;
    private final Hooks hooks;
    /** the states of freed slots; at most {@link Limits#maxActive()} states are ever made */
    private final ArrayDeque<DecodeState> free = new ArrayDeque<>();
    private int made;
    private boolean draining, closed;
    private int activeCount;
    private long steps, tokens, lastStepBytes;
    private double lastStepSeconds;
    private final long[] windowTokens = new long[RATE_WINDOW];
    private final double[] windowSeconds = new double[RATE_WINDOW];

    /**
     * Starts the batch thread.
     *
     * @param step   the step over the engine's weights
     * @param limits how many sequences run and wait, the prefill chunk and the context
     * @param vocab  the ids a prompt may hold: [0, vocab)
     * @param eos    the end-of-sequence id, or -1 (none)
     */
    public Batcher(BatchStep step, Limits limits, int vocab, int eos) {
        this(step, limits, vocab, eos, Hooks.NONE);
    }

    /** With {@code hooks} planted (the batch-invariance gate's schedules and mutants). */
    Batcher(BatchStep step, Limits limits, int vocab, int eos, Hooks hooks) {
        this.step = step;
        this.hooks = hooks;
        this.limits = limits;
        this.vocab = vocab;
        this.eos = eos;
        this.thread = Thread.ofPlatform().name("k3-batch").daemon(true).unstarted(this::loop);
        thread.start();
    }

    @Override
    public Ticket submit(Request request, Sink sink) {
        if (request == null || sink == null) throw new IllegalArgumentException("a request and its sink are required");
        int[] p = request.prompt();
        for (int i = 0; i < p.length; i++) {
            if (p[i] < 0 || p[i] >= vocab) throw new IllegalArgumentException("prompt id " + p[i] + " at position " + i + " is outside the vocabulary [0, " + vocab + ")");
        }
        long need = (long) p.length + request.maxTokens();
        if (need > limits.maxContext()) {
            throw new Rejected("the prompt's " + p.length + " ids and " + request.maxTokens() + " tokens to generate need " + need
                    + " positions; a sequence may hold " + limits.maxContext(), false);
        }
        Sequence s = new Sequence(request, sink, new Sampler(settings(request.sampling()), 0), this::wake, hooks.rows());
        synchronized (lock) {
            if (closed || draining) throw new Rejected("the server is shutting down", true);
            if (queue.size() + activeCount >= limits.maxActive() + limits.maxQueued()) {
                throw new Rejected("all " + limits.maxActive() + " slots are busy and " + queue.size() + " requests wait (at most " + limits.maxQueued() + ")", true);
            }
            queue.add(s);
            lock.notifyAll();
        }
        return s;
    }

    /** The sampler's settings of {@code s}: {@link k3j.api.Engine#generate} draws with the same, from turn 0. */
    private static Sampler.Settings settings(k3j.api.Sampling s) {
        return new Sampler.Settings(s.temperature(), s.topP(), s.topK(), s.seed());
    }

    private void wake() {
        synchronized (lock) {
            lock.notifyAll();
        }
    }

    @Override
    public Stats stats() {
        synchronized (lock) {
            long t = 0;
            double secs = 0;
            for (int i = 0; i < RATE_WINDOW; i++) {
                t += windowTokens[i];
                secs += windowSeconds[i];
            }
            return new Stats(queue.size(), activeCount, steps, tokens, lastStepSeconds, lastStepBytes, secs > 0 ? t / secs : 0);
        }
    }

    @Override
    public void drain() {
        synchronized (lock) {
            draining = true;
            lock.notifyAll();
            while (!closed && (!queue.isEmpty() || activeCount > 0)) {
                try {
                    lock.wait();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    @Override
    public void close() {
        synchronized (lock) {
            closed = true;
            lock.notifyAll();
        }
        if (Thread.currentThread() != thread) {
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    // ------------------------------------------------------------------ the batch thread

    private void loop() {
        List<Sequence> admitted = new ArrayList<>();
        while (true) {
            hooks.beforeStep().at(stepsRun(), this);
            List<Sequence> gone = new ArrayList<>();
            boolean stop;
            synchronized (lock) {
                while (!closed && queue.isEmpty() && active.isEmpty()) {
                    lock.notifyAll();   // a drain waiting for the batch to empty
                    try {
                        lock.wait();
                    } catch (InterruptedException e) {
                        closed = true;
                    }
                }
                stop = closed;
                admitted.clear();
                if (stop) {
                    gone.addAll(queue);
                    gone.addAll(active);
                    queue.clear();
                    active.clear();
                } else {
                    queue.removeIf(s -> s.cancelled && gone.add(s));
                    while (active.size() + admitted.size() < limits.maxActive() && !queue.isEmpty()) admitted.add(queue.poll());
                }
                activeCount = active.size() + admitted.size();
                lock.notifyAll();
            }
            for (Sequence s : gone) finish(s, Finish.CANCELLED, null);
            if (stop) return;
            for (Sequence s : admitted) {
                try {
                    s.state = slotState();
                    active.add(s);
                } catch (RuntimeException | OutOfMemoryError e) {
                    finish(s, Finish.ERROR, "its state could not be made: " + e);
                }
            }
            for (Sequence s : List.copyOf(active)) if (s.cancelled) leave(s, Finish.CANCELLED, null);
            if (!active.isEmpty()) runStep();
            synchronized (lock) {
                activeCount = active.size();
                lock.notifyAll();
            }
        }
    }

    private long stepsRun() {
        synchronized (lock) {
            return steps;
        }
    }

    private void runStep() {
        List<Sequence> in = List.copyOf(active);
        List<BatchStep.Feed> feeds = new ArrayList<>(in.size());
        for (Sequence s : in) feeds.add(new BatchStep.Feed(s.nextFeed(limits.prefillChunk()), s.state, s.prefilling() && s.request.promptLogprobs()));
        long t0 = System.nanoTime();
        float[][] logits;
        try {
            logits = step.run(feeds);
        } catch (RuntimeException | OutOfMemoryError e) {
            for (Sequence s : in) leave(s, Finish.ERROR, "the step failed: " + e.getMessage());
            return;
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        int made = 0;
        for (int i = 0; i < in.size(); i++) {
            Sequence s = in.get(i);
            int n = feeds.get(i).ids().length;
            try {
                if (absorb(s, logits[i], n, feeds.get(i).allPositions())) made++;
            } catch (RuntimeException | StackOverflowError e) {
                leave(s, Finish.ERROR, "its sink failed: " + e);
            }
        }
        synchronized (lock) {
            int slot = (int) (steps % RATE_WINDOW);
            windowTokens[slot] = made;
            windowSeconds[slot] = secs;
            steps++;
            tokens += made;
            lastStepSeconds = secs;
            lastStepBytes = step.lastStepBytes();
        }
    }

    /** Takes one sequence's logits of a step; {@return whether it generated an id} */
    private boolean absorb(Sequence s, float[] logits, int n, boolean all) {
        int[] p = s.request.prompt();
        if (s.prefilling()) {
            int from = s.fed;
            s.fed += n;
            if (all) {
                for (int r = 0; r < n; r++) {
                    int next = from + r + 1;
                    if (next < p.length) s.promptEntries.add(s.logprob(logits, r * vocab, vocab, p[next]));
                }
            }
            if (s.prefilling()) return false;
            if (s.request.promptLogprobs()) s.sink.prompt(List.copyOf(s.promptEntries));
            return emit(s, logits, all ? (n - 1) * vocab : 0);
        }
        return emit(s, logits, 0);
    }

    private boolean emit(Sequence s, float[] logits, int off) {
        int id = s.sampler.next(logits, off, vocab);
        s.last = id;
        int at = s.generated++;
        s.sink.token(at, s.logprob(logits, off, vocab, id));
        if (s.request.stopAtEos() && eos >= 0 && id == eos) leave(s, Finish.END_OF_SEQUENCE, null);
        else if (s.generated >= s.request.maxTokens()) leave(s, Finish.LENGTH, null);
        return true;
    }

    /**
     * A slot's state: a freed one, emptied, or a new one while fewer than {@link Limits#maxActive()} exist, each of
     * {@link Limits#maxContext()} + 1 positions (the serving plan counts exactly these).
     */
    private DecodeState slotState() {
        DecodeState st = free.poll();
        if (st == null) {
            if (made >= limits.maxActive()) throw new IllegalStateException("every one of the " + made + " slot states is in use");
            st = step.newState(limits.maxContext() + 1);
            made++;
        } else if (hooks.resetSlots()) st.reset();
        else st.restored(0);
        return st;
    }

    private void leave(Sequence s, Finish why, String detail) {
        active.remove(s);
        if (s.state != null) free.add(s.state);
        s.state = null;
        finish(s, why, detail);
    }

    private static void finish(Sequence s, Finish why, String detail) {
        if (s.done) return;
        s.done = true;
        try {
            s.sink.finished(why, detail);
        } catch (RuntimeException ignored) {
            // the sequence has ended either way; a sink that fails on its last call changes nothing else
        }
    }
}
