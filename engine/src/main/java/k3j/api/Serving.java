package k3j.api;

import java.util.List;

/**
 * Many sequences generated at once under one memory plan, by continuous batching: sequences join and leave
 * between steps, and one step runs the prefill chunks and decode tokens of every active sequence, reading each
 * weight once. A sequence's ids and logprobs are the same bits whatever runs beside it (docs/fp-contract.md,
 * batch invariance), and the same bits as {@link Engine#generate} on the same ids. The HTTP server ({@code k3 serve})
 * is a shell over this interface.
 */
public interface Serving extends AutoCloseable {

    /**
     * How many sequences may run and wait.
     *
     * @param maxActive    sequences in one step at most
     * @param maxQueued    sequences waiting for a slot at most; one more is {@link Rejected}
     * @param prefillChunk prompt ids of one sequence fed in one step at most (a longer prompt is fed over several steps)
     * @param maxContext   prompt plus generated positions of one sequence at most
     */
    record Limits(int maxActive, int maxQueued, int prefillChunk, int maxContext) {
        /** Checks that every limit is positive. */
        public Limits {
            if (maxActive < 1 || maxQueued < 0 || prefillChunk < 1 || maxContext < 2) {
                throw new IllegalArgumentException("serving limits must be positive: " + maxActive + " active, " + maxQueued
                        + " queued, prefill chunk " + prefillChunk + ", context " + maxContext);
            }
        }
    }

    /**
     * One sequence to generate.
     *
     * @param prompt          the prompt's ids (at least one)
     * @param maxTokens       ids to generate at most (at least one)
     * @param sampling        how each id is drawn; a seeded sampler of the sequence's own
     * @param topLogprobs     alternatives to report with each generated id, and with each prompt entry (0 to 20)
     * @param promptLogprobs  whether to report the logprob of every prompt id after the first (echo)
     * @param stopAtEos       whether the end-of-sequence id ends the sequence
     */
    record Request(int[] prompt, int maxTokens, Sampling sampling, int topLogprobs, boolean promptLogprobs, boolean stopAtEos) {
        /** Checks the counts. */
        public Request {
            if (prompt == null || prompt.length == 0) throw new IllegalArgumentException("no prompt ids");
            if (maxTokens < 1) throw new IllegalArgumentException("max tokens must be at least 1, not " + maxTokens);
            if (topLogprobs < 0 || topLogprobs > 20) throw new IllegalArgumentException("top logprobs must be 0 to 20, not " + topLogprobs);
            if (sampling == null) throw new IllegalArgumentException("no sampling");
            prompt = prompt.clone();
        }
    }

    /**
     * One id with its logprob (natural log, from the float32 logits of its position) and the most likely
     * alternatives at that position, most likely first (ties: the lower id first).
     *
     * @param id          the id
     * @param logprob     its logprob
     * @param topIds      the alternatives' ids
     * @param topLogprobs the alternatives' logprobs
     */
    record TokenLogprob(int id, float logprob, int[] topIds, float[] topLogprobs) {
        /** {@code id}'s entry, with {@code top} alternatives, from the logits row at {@code off} that chose it (the one log-softmax, k3j.sample.Logprobs). */
        static TokenLogprob of(float[] logits, int off, int vocab, int id, int top) {
            k3j.sample.Logprobs lp = new k3j.sample.Logprobs(logits, off, vocab);
            int[] ids = lp.top(top);
            float[] values = new float[ids.length];
            for (int i = 0; i < ids.length; i++) values[i] = lp.of(ids[i]);
            return new TokenLogprob(id, lp.of(id), ids, values);
        }
    }

    /** Why a sequence ended. */
    enum Finish {
        /** it generated its maximum tokens */
        LENGTH,
        /** it generated the end-of-sequence id */
        END_OF_SEQUENCE,
        /** its caller cancelled it (a stop string, a client gone) */
        CANCELLED,
        /** it failed; the detail says why */
        ERROR
    }

    /** Told what one sequence produces, on the batch's thread: it must return quickly and never block. */
    interface Sink {
        /**
         * The prompt's logprobs, once, before the first generated id; only when the request asked for them.
         *
         * @param entries entry i is prompt id i + 1 given the ids before it
         */
        void prompt(List<TokenLogprob> entries);

        /**
         * One generated id.
         *
         * @param step  its step, 0-based
         * @param token the id with its logprob and alternatives
         */
        void token(int step, TokenLogprob token);

        /**
         * The sequence ended; nothing follows.
         *
         * @param why    why
         * @param detail the error's message, or null
         */
        void finished(Finish why, String detail);
    }

    /** A submitted sequence. */
    interface Ticket {
        /** Ends the sequence before its next step; its slot is free within one step. */
        void cancel();
    }

    /** A sequence that was not admitted: the queue is full, or it can never fit the memory plan. */
    final class Rejected extends RuntimeException {
        private static final long serialVersionUID = 1L;

        /** Whether the same request may be admitted later. */
        private final boolean retryable;

        /**
         * A refusal.
         *
         * @param message   what was refused and why
         * @param retryable whether the same request may be admitted later (a full queue), or never (too long for the plan)
         */
        public Rejected(String message, boolean retryable) {
            super(message);
            this.retryable = retryable;
        }

        /** {@return whether the same request may be admitted later} */
        public boolean retryable() {
            return retryable;
        }
    }

    /**
     * What the batch is doing now.
     *
     * @param queued          sequences waiting for a slot
     * @param active          sequences in the batch
     * @param steps           steps run so far
     * @param tokens          ids generated so far
     * @param lastStepSeconds the last step's time
     * @param lastStepBytes   the bytes of weights the last step read
     * @param tokensPerSecond ids generated per second over the last steps
     */
    record Stats(int queued, int active, long steps, long tokens, double lastStepSeconds, long lastStepBytes, double tokensPerSecond) {}

    /**
     * Serving over {@code engine}'s weights: starts the batch thread. While it runs, the engine's own
     * {@link Engine#generate} must not be called (one forward, one thread at a time).
     *
     * The serving plan is checked against the machine's memory as it is now, which the engine's weights already
     * take from: {@link #open(Engine, Limits, MachineMemory)} with the memory read before the engine opened counts
     * them once.
     *
     * @param engine the opened model
     * @param limits how many sequences run and wait, the prefill chunk and the context
     * @return the serving; close it before the engine
     */
    static Serving open(Engine engine, Limits limits) {
        return open(engine, limits, MachineMemory.read());
    }

    /**
     * Serving over {@code engine}'s weights, its memory plan (the weights and every slot's state) refused when it
     * does not fit {@code memory}.
     *
     * @param engine the opened model
     * @param limits how many sequences run and wait, the prefill chunk and the context
     * @param memory the machine's memory before the engine opened (the plan holds the weights the engine loaded)
     * @return the serving; close it before the engine
     */
    static Serving open(Engine engine, Limits limits, MachineMemory memory) {
        if (limits.maxContext() > engine.maxPositions()) {
            throw new IllegalArgumentException("a context of " + limits.maxContext() + " positions is over the " + engine.maxPositions() + " " + engine.maxPositionsSource());
        }
        k3j.plan.MemoryPlan plan = servingPlan(engine, limits);
        plan.planRefusal(memory.memInfo()).ifPresent(r -> {
            throw new Engine.OpenException(r);
        });
        return new Batcher(new k3j.model.BatchStep(engine.forward()), limits, engine.config().vocabSize(), engine.eos());
    }

    /**
     * What serving under {@code limits} holds beside the weights: a state of {@code maxContext} + 1 positions for each of
     * {@code maxActive} sequences, and the buffers of a step of every sequence's prefill chunk.
     *
     * @param engine the opened model
     * @param limits the serving limits
     * @return the memory plan, refused by {@link #open} when it does not fit the machine
     */
    static PlannedMemory plan(Engine engine, Limits limits) {
        return PlannedMemory.of(servingPlan(engine, limits));
    }

    private static k3j.plan.MemoryPlan servingPlan(Engine engine, Limits limits) {
        return engine.memoryPlan().serving(engine.config(), limits.maxActive(), limits.maxContext() + 1, Math.multiplyExact(limits.maxActive(), limits.prefillChunk()));
    }

    /**
     * Queues one sequence.
     *
     * @param request what to generate
     * @param sink    told what it produces
     * @return the ticket to cancel it with
     * @throws Rejected when it is not admitted
     * @throws IllegalArgumentException when a prompt id is outside the vocabulary
     */
    Ticket submit(Request request, Sink sink);

    /** {@return what the batch is doing now} */
    Stats stats();

    /** Refuses new sequences from now on, finishes those admitted, then returns. */
    void drain();

    /** Stops the batch: sequences still running end as {@link Finish#CANCELLED}. */
    @Override
    void close();
}
