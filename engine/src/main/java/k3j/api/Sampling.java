package k3j.api;

import k3j.sample.Sampler;

/**
 * How the next id is drawn from the logits: temperature 0 is greedy (the first maximal id), otherwise softmax
 * at {@code temperature} over the {@code topK} most likely ids (0: all) within the nucleus of mass {@code topP},
 * drawn with a generator seeded by {@code seed}: the same seed gives the same ids.
 *
 * @param temperature 0 (greedy) or more
 * @param topP        nucleus mass in (0, 1]
 * @param topK        the most likely ids to draw among; 0 = all
 * @param seed        the generator's seed
 */
public record Sampling(double temperature, double topP, int topK, long seed) {
    /** Greedy decoding. */
    public static final Sampling GREEDY = new Sampling(0, 1, 0, 0);

    /**
     * Checks the values by the sampler's own rules (temperature not negative, top-p in (0, 1], top-k not negative).
     */
    public Sampling {
        sampler(temperature, topP, topK, seed);   // the sampler's own checks, with its messages
    }

    /** {@return whether this is greedy decoding (temperature 0)} */
    public boolean greedy() {
        return temperature == 0;
    }

    Sampler.Settings sampler() {
        return sampler(temperature, topP, topK, seed);
    }

    private static Sampler.Settings sampler(double temperature, double topP, int topK, long seed) {
        return new Sampler.Settings(temperature, topP, topK, seed);
    }

    @Override
    public String toString() {
        return greedy() ? "greedy" : "temperature " + temperature + ", top-p " + topP + ", top-k " + topK + ", seed " + seed;
    }
}
