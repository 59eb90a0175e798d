package k3j.api;

/**
 * How to generate: the sampler (temperature 0 is greedy; top-p, top-k and the seed otherwise), how many tokens at
 * most, whether to stop at the end-of-sequence token, incremental decoding (KV cache and carried KDA state) or
 * full recompute, and speculative drafts (greedy and incremental only). The same settings give the same ids at
 * every thread count and memory plan.
 *
 * @param sampling    how the next id is drawn ({@link Sampling#GREEDY}: the first maximal id)
 * @param maxTokens   tokens to generate at most
 * @param stopAtEos   stop after the tokenizer's end-of-sequence token (needs a tokenizer; ids without one never stop early)
 * @param incremental incremental decoding (a KV cache and the carried KDA state, one token fed a step) rather than full
 *                    recompute (every step one forward over the whole sequence); the same ids either way
 * @param speculative draft up to this many ids per verifying forward (0: off)
 */
public record Settings(Sampling sampling, int maxTokens, boolean stopAtEos, boolean incremental, int speculative) {
    /**
     * Checks the sampling is given, the counts are not negative, and speculation is asked only of greedy incremental decoding.
     */
    public Settings {
        if (sampling == null) throw new IllegalArgumentException("sampling settings are required");
        if (maxTokens < 0) throw new IllegalArgumentException("maxTokens must be >= 0, got " + maxTokens);
        if (speculative < 0) throw new IllegalArgumentException("speculative must be >= 0, got " + speculative);
        if (speculative > 0 && (!incremental || !sampling.greedy())) throw new IllegalArgumentException("speculative decoding is greedy and incremental only");
    }

    /**
     * Greedy, incremental, {@code maxTokens} at most, stopping at the end of sequence.
     *
     * @param maxTokens tokens to generate at most
     * @return the settings
     */
    public static Settings greedy(int maxTokens) {
        return new Settings(Sampling.GREEDY, maxTokens, true, true, 0);
    }

    /**
     * These settings with the sampler {@link Sampling} makes of the four values.
     *
     * @param temperature 0 (greedy) or more
     * @param topP nucleus mass in (0, 1]
     * @param topK the most likely ids to draw among; 0: all
     * @param seed the generator's seed
     * @return a copy of these settings with that change
     */
    public Settings withSampling(double temperature, double topP, int topK, long seed) {
        return new Settings(new Sampling(temperature, topP, topK, seed), maxTokens, stopAtEos, incremental, speculative);
    }

    /**
     * These settings generating {@code n} tokens at most.
     *
     * @param n tokens to generate at most
     * @return a copy of these settings with that change
     */
    public Settings withMaxTokens(int n) {
        return new Settings(sampling, n, stopAtEos, incremental, speculative);
    }

    /**
     * These settings stopping at the end of sequence, or generating through it.
     *
     * @param stop whether generation stops after the end-of-sequence token
     * @return a copy of these settings with that change
     */
    public Settings withStopAtEos(boolean stop) {
        return new Settings(sampling, maxTokens, stop, incremental, speculative);
    }

    /**
     * These settings with incremental decoding or full recompute (the same ids either way).
     *
     * @param on incremental decoding rather than full recompute
     * @return a copy of these settings with that change
     */
    public Settings withIncremental(boolean on) {
        return new Settings(sampling, maxTokens, stopAtEos, on, speculative);
    }

    /**
     * These settings with speculative decoding drafting up to {@code drafts} ids per verifying forward.
     *
     * @param drafts ids drafted per verifying forward at most (0: off)
     * @return a copy of these settings with that change
     */
    public Settings withSpeculative(int drafts) {
        return new Settings(sampling, maxTokens, stopAtEos, incremental, drafts);
    }
}
