package k3j.api;

import k3j.model.BatchStep;

/** A {@link Batcher} with the batch-invariance gate's hooks planted: submissions at given steps, every logits row seen, and the slot-reuse fault. */
public final class PlantedBatcher {
    private PlantedBatcher() {}

    /** Told, on the batch thread, before each step's admissions, how many steps have run; it may submit. */
    @FunctionalInterface
    public interface BeforeStep {
        /**
         * Before a step.
         *
         * @param steps   the steps run so far
         * @param serving the batcher to submit to
         */
        void at(long steps, Serving serving);
    }

    /** Told each logits row a sequence's logprobs come from. */
    @FunctionalInterface
    public interface Rows {
        /**
         * One row.
         *
         * @param who    the sequence
         * @param logits the step's logits of that sequence
         * @param off    the row's first logit
         * @param n      the row's width
         */
        void row(Serving.Ticket who, float[] logits, int off, int n);
    }

    /**
     * A batcher over {@code step}.
     *
     * @param step       the step (a planted one for the batch-reduction mutant)
     * @param limits     the limits
     * @param vocab      the ids a prompt may hold
     * @param eos        the end-of-sequence id, or -1
     * @param beforeStep told the steps run so far, on the batch thread, before each step's admissions
     * @param rows       told each logits row
     * @param resetSlots false: a freed slot's state is reused as it was left (the mutant)
     * @return the serving; close it
     */
    public static Serving open(BatchStep step, Serving.Limits limits, int vocab, int eos, BeforeStep beforeStep, Rows rows, boolean resetSlots) {
        return new Batcher(step, limits, vocab, eos, new Hooks(beforeStep::at, rows::row, resetSlots));
    }
}
