package k3j.api;


/**
 * What the batch-invariance gate plants in a {@link Batcher}: a call on the batch thread before each step (to submit
 * sequences at given steps), a look at every logits row a sequence's logprobs are taken from, and the slot-reuse fault.
 *
 * @param beforeStep told the number of steps run so far, on the batch thread, before each step's admissions (it may submit)
 * @param rows       told each row a sequence's logprobs come from
 * @param resetSlots false plants the fault: a freed slot's state reused as it was left
 */
record Hooks(BeforeStep beforeStep, RowTap rows, boolean resetSlots) {
    /** Nothing planted. */
    static final Hooks NONE = new Hooks((steps, serving) -> {}, (who, logits, off, n) -> {}, true);

    /** Told, on the batch thread, before each step's admissions, how many steps have run; it may submit to {@code serving}. */
    @FunctionalInterface
    interface BeforeStep {
        /**
         * Before a step.
         *
         * @param steps   the steps run so far
         * @param serving the batcher
         */
        void at(long steps, Serving serving);
    }

    /** Told each logits row a sequence's logprobs come from. */
    @FunctionalInterface
    interface RowTap {
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
}
