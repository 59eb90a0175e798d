package k3j.api;

/**
 * One generation: the prompt as given, the generated ids (an end of sequence included), their text (without it;
 * null without a tokenizer), why it stopped, the seconds of each step, the logits that chose the first id, the
 * state after it (incremental runs; null for full recompute) and what speculation did (null without it).
 *
 * @param prompt      the prompt's ids as given
 * @param ids         the generated ids, an end of sequence included
 * @param text        the generated text without the end of sequence; null without a tokenizer
 * @param stop        why generation stopped
 * @param stepSeconds the seconds each step took, the first one with the prompt's prefill
 * @param firstLogits the logits that chose the first id (null when none was generated)
 * @param state       the state after the generation (incremental runs; null for full recompute)
 * @param speculation what speculative decoding did (null without it)
 */
public record Generated(int[] prompt, int[] ids, String text, Stop stop, double[] stepSeconds, float[] firstLogits, State state, Speculation speculation) {
    /** Why a generation ended. */
    public enum Stop {
        /** Every token asked for was generated. */
        MAX_TOKENS,
        /** The end-of-sequence token was generated (it is the last id; the text ends before it). */
        END_OF_SEQUENCE,
        /** A stop was requested (a signal): the ids generated until then are kept. */
        INTERRUPTED
    }

    /**
     * Speculative decoding's counts.
     *
     * @param draftLimit    ids drafted per verifying forward at most
     * @param verifications verifying forwards run
     * @param drafted       ids drafted
     * @param accepted      drafted ids the verifying forwards accepted
     */
    public record Speculation(int draftLimit, int verifications, int drafted, int accepted) {
        /** {@return the share of drafted ids accepted, 0 when none was drafted} */
        public double acceptance() {
            return drafted == 0 ? 0.0 : (double) accepted / drafted;
        }
    }

    /** One line: how many ids, why it stopped, and the text (shortened) or the first ids. */
    @Override
    public String toString() {
        String shown = text != null ? "\"" + (text.length() > 60 ? text.substring(0, 57) + "..." : text) + "\""
                : java.util.Arrays.toString(java.util.Arrays.copyOf(ids, Math.min(ids.length, 12))) + (ids.length > 12 ? "..." : "");
        return "Generated[" + ids.length + " id(s) after a prompt of " + prompt.length + ", stopped: " + stop + ", " + shown + "]";
    }

    /** {@return the seconds of every step together} */
    public double seconds() {
        double s = 0;
        for (double x : stepSeconds) s += x;
        return s;
    }
}
