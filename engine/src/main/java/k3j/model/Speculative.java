package k3j.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.kernels.Argmax;

/**
 * Speculative greedy decoding ({@code k3 run --spec N}, docs/semantics.md §4.4): the same ids as plain greedy
 * incremental decoding, by construction, in fewer forwards when the text repeats itself.
 *
 * <p>Drafting by n-gram: for suffix lengths 4 then 3, find the two most recent earlier occurrences of the last n
 * ids and propose the ids that followed the most recent one, up to N, stopping where the two continuations
 * disagree. Verification: snapshot the KDA states, feed [pending id, d1..dk] in ONE forward with every
 * position's logits; m = the leading drafts equal to the argmax before them. All accepted: the state already
 * holds the k + 1 positions. Otherwise restore the snapshot and feed only the m + 1 accepted positions again (a
 * T-token forward has the bits of T single-token forwards, so the state is the plain decode's). Emit d1..dm,
 * then the argmax after dm.
 */
public final class Speculative {
    private Speculative() {}

    /** Drafts are clamped to this many ids. */
    public static final int MAX_DRAFT = 8;

    /** Proposes up to {@code max} ids to follow seq[0..len); any proposal is safe (verification keeps the ids exact). */
    @FunctionalInterface
    public interface Drafter {
        int[] draft(int[] seq, int len, int max);
    }

    /** The n-gram drafter described above. */
    public static final Drafter NGRAM = Speculative::draft;

    /** The generation and what speculation did: verifying forwards, drafted ids, accepted ids. */
    public record Result(Generation generation, int verifications, int drafted, int accepted) {
        public double acceptance() {
            return drafted == 0 ? 0.0 : (double) accepted / drafted;
        }
    }

    /**
     * Greedy incremental generation of {@code gen} ids after {@code prompt}, drafting up to {@code spec} ids per
     * forward. {@code state} must be empty or hold earlier positions the prompt continues; capacity prompt + gen + 1.
     */
    public static Result greedy(Forward f, int[] prompt, int gen, int spec, DecodeState state, Generation.Progress progress) {
        return greedy(f, prompt, gen, spec, state, NGRAM, progress);
    }

    /** {@link #greedy(Forward, int[], int, int, DecodeState, Generation.Progress)} with any drafter (gates use adversarial ones). */
    public static Result greedy(Forward f, int[] prompt, int gen, int spec, DecodeState state, Drafter drafter, Generation.Progress progress) {
        return greedy(f, prompt, gen, spec, state, drafter, progress, id -> false);
    }

    /**
     * As {@link #greedy(Forward, int[], int, int, DecodeState, Drafter, Generation.Progress)}, ending after an id
     * {@code stop} accepts (the end of sequence). Drafts end before such an id, so it is only ever emitted as the
     * argmax after a verification, and the state holds every emitted id but the last, as in plain decoding.
     */
    public static Result greedy(Forward f, int[] prompt, int gen, int spec, DecodeState state, Drafter drafter, Generation.Progress progress,
                                java.util.function.IntPredicate stop) {
        if (prompt.length < 1) throw new IllegalArgumentException("no prompt ids");
        if (spec < 0) throw new IllegalArgumentException("--spec must be >= 0, got " + spec);
        int draftMax = Math.min(spec, MAX_DRAFT), v = f.weights().lmHead().rows();
        int[] seq = Arrays.copyOf(prompt, prompt.length + gen);
        int n = prompt.length, verifications = 0, drafted = 0, accepted = 0;
        List<float[]> logits = new ArrayList<>();
        double[] secs = new double[gen];
        int emitted = 0;
        boolean stopped = false;
        while (emitted < gen && !stopped) {
            long t0 = System.nanoTime();
            int[] out;
            if (emitted == 0) {
                Forward.Result r = f.step(prompt.clone(), state, false, null);
                logits.add(r.logits());
                out = new int[] {Argmax.fast(r.logits(), 0, v)};
            } else {
                int max = Math.min(draftMax, gen - emitted - 1);
                int[] d = max <= 0 ? new int[0] : drafter.draft(seq, n, max);
                if (d.length > max) d = Arrays.copyOf(d, max);
                for (int i = 0; i < d.length; i++) {
                    if (stop.test(d[i])) {
                        d = Arrays.copyOf(d, i);
                        break;
                    }
                }
                if (d.length == 0) {
                    out = new int[] {Argmax.fast(f.step(new int[] {seq[n - 1]}, state, false, null).logits(), 0, v)};
                } else {
                    int[] feed = new int[d.length + 1];
                    feed[0] = seq[n - 1];
                    System.arraycopy(d, 0, feed, 1, d.length);
                    DecodeState.Snapshot snap = state.snapshot();
                    float[] all = f.step(feed, state, true, null).logits();
                    int m = 0;
                    while (m < d.length && Argmax.fast(all, m * v, v) == d[m]) m++;
                    int next = Argmax.fast(all, m * v, v);
                    if (m < d.length) {
                        state.restore(snap);
                        f.step(Arrays.copyOf(feed, m + 1), state, false, null);
                    }
                    verifications++;
                    drafted += d.length;
                    accepted += m;
                    out = Arrays.copyOf(d, m + 1);
                    out[m] = next;
                }
            }
            double each = (System.nanoTime() - t0) / 1e9 / out.length;
            for (int id : out) {
                seq[n++] = id;
                secs[emitted] = each;
                if (progress != null) progress.token(emitted, id, each);
                emitted++;
                stopped = stop.test(id);
            }
        }
        Generation g = new Generation(prompt.clone(), Arrays.copyOfRange(seq, prompt.length, n), List.copyOf(logits), Arrays.copyOf(secs, emitted));
        return new Result(g, verifications, drafted, accepted);
    }

    /** Up to {@code max} ids proposed from the n-gram history of seq[0..len). */
    static int[] draft(int[] seq, int len, int max) {
        if (max <= 0) return new int[0];
        for (int n = 4; n >= 3; n--) {
            if (len < n + 1) continue;
            int c1 = -1, c2 = -1;   // where the continuations of the most recent and the second most recent match start
            for (int j = len - n - 1; j >= 0 && c2 < 0; j--) {
                if (Arrays.equals(seq, j, j + n, seq, len - n, len)) {
                    if (c1 < 0) c1 = j + n;
                    else c2 = j + n;
                }
            }
            if (c1 < 0) continue;
            int k = 0;
            while (k < max && c1 + k < len && (c2 < 0 || seq[c2 + k] == seq[c1 + k])) k++;
            if (k > 0) return Arrays.copyOfRange(seq, c1, c1 + k);
        }
        return new int[0];
    }
}
