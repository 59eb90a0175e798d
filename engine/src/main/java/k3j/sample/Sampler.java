package k3j.sample;

import java.util.Arrays;
import k3j.kernels.Argmax;

/**
 * Picks the next token from logits (docs/semantics.md §8.5): greedy at temperature 0; otherwise softmax at the
 * temperature in double (StrictMath.exp, so every JVM gives the same bits), ids sorted by probability (ties:
 * lower id first), the shortest prefix of at most top-k ids whose mass reaches top-p, and a draw in that mass.
 * Deterministic: the same settings, seed, turn and logits give the same id.
 */
public final class Sampler {
    /**
     * @param temperature 0 = greedy, else > 0
     * @param topP        in (0, 1]
     * @param topK        0 = no limit
     */
    public record Settings(double temperature, double topP, int topK, long seed) {
        public static final Settings GREEDY = new Settings(0, 1, 0, 0);

        public Settings {
            if (!(temperature >= 0) || Double.isInfinite(temperature)) throw new IllegalArgumentException("temperature must be >= 0 and finite, got " + temperature);
            if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("top-p must be in (0, 1], got " + topP);
            if (topK < 0) throw new IllegalArgumentException("top-k must be >= 0 (0 = no limit), got " + topK);
        }

        public boolean greedy() {
            return temperature == 0;
        }
    }

    private final Settings settings;
    private final Pcg32 rng;

    /** @param turn the conversation turn (0 for a single prompt): each turn draws from its own stream */
    public Sampler(Settings settings, long turn) {
        this.settings = settings;
        this.rng = new Pcg32(settings.seed(), turn);
    }

    public Settings settings() {
        return settings;
    }

    /** The id picked from {@code logits[off, off+n)}. */
    public int next(float[] logits, int off, int n) {
        int best = Argmax.fast(logits, off, n);
        if (settings.greedy()) return best;
        double t = settings.temperature(), top = logits[off + best] / t;
        double[] p = new double[n];
        double sum = 0;
        for (int i = 0; i < n; i++) sum += p[i] = StrictMath.exp(logits[off + i] / t - top);
        if (!(sum > 0) || Double.isInfinite(sum)) return best;
        for (int i = 0; i < n; i++) p[i] /= sum;
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> p[a] != p[b] ? Double.compare(p[b], p[a]) : Integer.compare(a, b));
        int nw = settings.topK() > 0 && settings.topK() < n ? settings.topK() : n, keep = 0;
        double mass = 0;
        while (keep < nw) {
            mass += p[order[keep++]];
            if (mass >= settings.topP()) break;
        }
        double r = rng.unit() * mass, acc = 0;
        for (int i = 0; i < keep; i++) {
            acc += p[order[i]];
            if (r < acc) return order[i];
        }
        return order[keep - 1];
    }
}
