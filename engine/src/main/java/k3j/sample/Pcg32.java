package k3j.sample;

/**
 * PCG32 (XSH-RR, 64-bit state) seeded through SplitMix64 (docs/semantics.md §8.5). Turn t of a conversation
 * seeds from {@code seed ⊕ t·0x9E3779B97F4A7C15}, so each turn has its own stream and a replayed turn repeats it.
 */
public final class Pcg32 {
    private static final long GOLDEN = 0x9E3779B97F4A7C15L, MULTIPLIER = 6364136223846793005L;
    private long state;
    private final long inc;

    public Pcg32(long seed, long turn) {
        long[] x = {seed ^ (turn * GOLDEN)};
        long s = splitmix64(x), q = splitmix64(x);
        inc = (q << 1) | 1;
        state = 0;
        next();
        state += s;
        next();
    }

    /** Advances {@code x[0]} by the golden gamma and returns the mixed value. */
    static long splitmix64(long[] x) {
        x[0] += GOLDEN;
        long z = x[0];
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    /** The next 32 random bits (as an unsigned value in an int). */
    public int next() {
        long old = state;
        state = old * MULTIPLIER + inc;
        int xs = (int) (((old >>> 18) ^ old) >>> 27);
        int rot = (int) (old >>> 59);
        return Integer.rotateRight(xs, rot);
    }

    /** A double in [0, 1) with 53 random bits: the first draw gives the high 32, the second the low 21. */
    public double unit() {
        long a = next() & 0xFFFFFFFFL, b = next() & 0x1FFFFFL;
        return ((a << 21) ^ b) * 0x1p-53;
    }
}
