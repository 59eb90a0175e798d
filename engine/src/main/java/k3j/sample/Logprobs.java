package k3j.sample;

import java.util.Arrays;

/**
 * The log-probabilities of one position's float32 logits (docs/fp-contract.md §8): m = the first maximum (strict
 * {@code >}, NaN skipped), Z = Σ StrictMath.exp((double) l_i − m) in double over the ids in increasing order, and
 * logprob_i = (float) ((double) l_i − m − StrictMath.log(Z)). One function, one order: the same logits give the same
 * bits whoever asks.
 */
public final class Logprobs {
    private final float[] logits;
    private final int off, n;
    private final double max, logZ;

    /**
     * The log-softmax of {@code logits[off, off + n)}.
     *
     * @param logits the logits
     * @param off    the first
     * @param n      how many (the vocabulary)
     */
    public Logprobs(float[] logits, int off, int n) {
        if (n < 1 || off < 0 || off + n > logits.length) throw new IllegalArgumentException("logits [" + off + ", " + (off + n) + ") of " + logits.length);
        this.logits = logits;
        this.off = off;
        this.n = n;
        float m = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) if (logits[off + i] > m) m = logits[off + i];
        double z = 0;
        for (int i = 0; i < n; i++) z += StrictMath.exp((double) logits[off + i] - m);
        this.max = m;
        this.logZ = StrictMath.log(z);
    }

    /**
     * {@return the logprob of {@code id}}
     *
     * @param id the id, in [0, n)
     */
    public float of(int id) {
        if (id < 0 || id >= n) throw new IllegalArgumentException("id " + id + " outside [0, " + n + ")");
        return (float) ((double) logits[off + id] - max - logZ);
    }

    /**
     * The {@code k} most likely ids, most likely first: by logprob, ties (equal floats) to the lower id; NaN last.
     *
     * @param k how many (at most n)
     * @return their ids
     */
    public int[] top(int k) {
        int m = Math.min(k, n);
        int[] best = new int[m];
        float[] lp = new float[m];
        int have = 0;
        for (int i = 0; i < n; i++) {
            float v = of(i);
            if (have == m && !before(v, i, lp[m - 1], best[m - 1])) continue;
            int at = have < m ? have++ : m - 1;
            while (at > 0 && before(v, i, lp[at - 1], best[at - 1])) {
                lp[at] = lp[at - 1];
                best[at] = best[at - 1];
                at--;
            }
            lp[at] = v;
            best[at] = i;
        }
        return Arrays.copyOf(best, have);
    }

    /** Whether (a, ia) comes before (b, ib): the larger logprob, then the lower id; NaN after every number. */
    private static boolean before(float a, int ia, float b, int ib) {
        if (Float.isNaN(a)) return Float.isNaN(b) && ia < ib;
        if (Float.isNaN(b)) return true;
        return a > b || (a == b && ia < ib);
    }
}
