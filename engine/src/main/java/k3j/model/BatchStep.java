package k3j.model;

import java.util.List;

/**
 * One step over several sequences (continuous batching): each sequence feeds a prefill chunk or one decode token at
 * its own state's positions, and the step returns each sequence's logits. A sequence's logits are the bits of
 * {@link Forward#step} over the same ids and state, whatever runs beside it (docs/fp-contract.md §8).
 */
public final class BatchStep {
    /**
     * One sequence's part of a step.
     *
     * @param ids          the ids fed, at positions state.cached() ..
     * @param state        the sequence's own state, advanced by the step
     * @param allPositions whether every position's logits are returned (else the last one's)
     */
    public record Feed(int[] ids, DecodeState state, boolean allPositions) {
        /** Checks the feed is not empty and fits its state. */
        public Feed {
            if (ids == null || ids.length == 0) throw new IllegalArgumentException("a feed needs at least one id");
            if (state == null) throw new IllegalArgumentException("a feed needs its sequence's state");
        }
    }

    private final Forward forward;

    /**
     * Steps over {@code forward}'s weights and workers.
     *
     * @param forward the forward whose weights, experts and workers the step uses
     */
    public BatchStep(Forward forward) {
        this.forward = forward;
    }

    /** {@return the bytes of weights the last step read} */
    public long lastStepBytes() {
        return 0;
    }

    /** {@return the logits' width} */
    public int vocab() {
        return forward.weights().lmHead().rows();
    }

    /**
     * A fresh state for one sequence.
     *
     * @param capacity its positions
     * @return the state
     */
    public DecodeState newState(int capacity) {
        return forward.newState(capacity);
    }

    /**
     * Runs one step.
     *
     * @param feeds the step's sequences, each with its own state
     * @return per feed, its logits: [ids.length][V] when it asked for every position, else [1][V]
     */
    public float[][] run(List<Feed> feeds) {
        float[][] out = new float[feeds.size()][];
        for (int i = 0; i < feeds.size(); i++) {
            Feed f = feeds.get(i);
            out[i] = forward.step(f.ids().clone(), f.state(), f.allPositions(), null).logits();
        }
        return out;
    }
}
