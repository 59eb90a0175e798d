package k3j.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.kernels.Argmax;

/**
 * Greedy generation (docs/semantics.md §4.3): full recompute (each step one forward over the whole sequence, fresh
 * state) or incremental (step 0 feeds the prompt, later steps the last emitted token, KV cache and KDA state
 * carried). Argmax: the first maximal index wins. stepLogits[g] = the V logits that chose generated[g] (only step 0 unless all were kept).
 */
public record Generation(int[] prompt, int[] generated, List<float[]> stepLogits, double[] stepSeconds) {

    public double seconds() {
        return Arrays.stream(stepSeconds).sum();
    }

    /** KV capacity for an incremental run: prompt + gen + 1 positions (docs/semantics.md §4.3). */
    public static int capacity(int promptLength, int gen) {
        return promptLength + gen + 1;
    }

    /** Emitted once per generated token, as it is chosen. */
    @FunctionalInterface
    public interface Progress {
        void token(int step, int id, double seconds);
    }

    /** Keeps every step's logits (gates). */
    public static Generation greedy(Forward f, int[] prompt, int gen, boolean incremental) {
        return greedy(f, prompt, gen, incremental, true, null);
    }

    /**
     * @param keepAllLogits false keeps only step 0's logits (V floats per step add up: 163840 × 4096 steps is 2.7 GB)
     * @param progress      nullable; told each token as it is chosen
     */
    public static Generation greedy(Forward f, int[] prompt, int gen, boolean incremental, boolean keepAllLogits, Progress progress) {
        return run(f, prompt, gen, incremental ? f.newState(capacity(prompt.length, gen)) : null, (l, v) -> Argmax.fast(l, 0, v), keepAllLogits, progress);
    }

    /** Picks the next id from the V logits of the last position. */
    @FunctionalInterface
    public interface Picker {
        int pick(float[] logits, int v);
    }

    /**
     * Generation with any picker (a sampler). {@code state} null: full recompute; else incremental from it — a
     * state loaded from a file already holds earlier positions, and the prompt continues them.
     */
    public static Generation run(Forward f, int[] prompt, int gen, DecodeState state, Picker picker, boolean keepAllLogits, Progress progress) {
        return run(f, prompt, gen, state, picker, keepAllLogits, progress, id -> false);
    }

    /** As {@link #run(Forward, int[], int, DecodeState, Picker, boolean, Progress)}, ending early after an id {@code stop} accepts (the end of sequence). */
    public static Generation run(Forward f, int[] prompt, int gen, DecodeState state, Picker picker, boolean keepAllLogits, Progress progress,
                                 java.util.function.IntPredicate stop) {
        if (prompt.length < 1) throw new IllegalArgumentException("no prompt ids");
        int v = f.weights().lmHead().rows();
        int[] seq = Arrays.copyOf(prompt, prompt.length + gen);
        int n = prompt.length;
        List<float[]> logits = new ArrayList<>();
        double[] secs = new double[gen];
        for (int g = 0; g < gen; g++) {
            long t0 = System.nanoTime();
            Forward.Result r;
            if (state == null) r = f.fullReusingOneStateSlot(Arrays.copyOf(seq, n), false); // one KDA slot: bit-identical (OracleGate)
            else if (g == 0) r = f.step(prompt.clone(), state, false, null);
            else r = f.step(new int[] {seq[n - 1]}, state, false, null);
            seq[n++] = picker.pick(r.logits(), v);
            if (keepAllLogits || g == 0) logits.add(r.logits());
            secs[g] = (System.nanoTime() - t0) / 1e9;
            if (progress != null) progress.token(g, seq[n - 1], secs[g]);
            if (stop.test(seq[n - 1])) {
                secs = Arrays.copyOf(secs, g + 1);
                break;
            }
        }
        return new Generation(prompt.clone(), Arrays.copyOfRange(seq, prompt.length, n), List.copyOf(logits), secs);
    }
}
