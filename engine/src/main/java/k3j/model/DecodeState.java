package k3j.model;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.kernels.Layers;
import k3j.kernels.MlaKv;

/**
 * What incremental decoding carries between steps (docs/semantics.md §4.3): per KDA layer the recurrent state and the
 * three short-conv histories, per MLA layer the expanded K/V rows of positions 0..cached−1, and
 * {@code cached}. The capacity is fixed when the state is made; writing past it is a
 * {@link ForwardException}, never stale data.
 */
public final class DecodeState {
    final Layers.KdaState[] kda;
    final MlaKv[] kv;
    final int capacity;
    int cached;

    private DecodeState(ModelWeights w, int capacity) {
        this.capacity = capacity;
        int n = w.layers().size();
        kda = new Layers.KdaState[n];
        kv = new MlaKv[n];
        for (LayerWeights l : w.layers()) {
            switch (l.mixer()) {
                case TokenMixer.Kda k -> kda[l.index()] = newKdaState(k.weights());
                case TokenMixer.Mla m -> kv[l.index()] = newMlaKv(m.weights(), capacity);
            }
        }
    }

    /** The same state from the config alone, for layers 0..layers−1 (a streamed trunk binds no layer up front). */
    private DecodeState(k3j.config.ModelConfig c, int layers, int capacity) {
        this.capacity = capacity;
        kda = new Layers.KdaState[layers];
        kv = new MlaKv[layers];
        for (int l = 0; l < layers; l++) {
            if (c.layerKind(l) == k3j.config.LayerKind.KDA) {
                kda[l] = newKdaState(c.kdaHeads(), c.kdaHeadDim(), c.shortConvKernel());
            } else {
                kv[l] = new MlaKv(c.mlaHeads(), c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim(), capacity);
            }
        }
    }

    /** A fresh state for layers 0..layers−1 from the config (shapes as {@link WeightLoader#layer} binds them). */
    public static DecodeState create(k3j.config.ModelConfig c, int layers, int capacity) {
        if (capacity < 1) throw new IllegalArgumentException("KV capacity must be >= 1, got " + capacity);
        return new DecodeState(c, layers, capacity);
    }

    /** A fresh state for up to {@code capacity} positions (prompt + generated + 1 for the C engine's cap). */
    public static DecodeState create(ModelWeights w, int capacity) {
        if (capacity < 1) throw new IllegalArgumentException("KV capacity must be >= 1, got " + capacity);
        return new DecodeState(w, capacity);
    }

    static Layers.KdaState newKdaState(Layers.KdaWeights k) {
        return newKdaState(k.heads(), k.headDim(), k.convKernel());
    }

    private static Layers.KdaState newKdaState(int heads, int headDim, int convKernel) {
        int p = heads * headDim, hist = convKernel - 1;
        return new Layers.KdaState(new float[heads * headDim * headDim], new float[p * hist], new float[p * hist], new float[p * hist]);
    }

    static MlaKv newMlaKv(Layers.MlaWeights m, int capacity) {
        return new MlaKv(m.heads(), m.nope(), m.rope(), m.value(), capacity);
    }

    static void clear(Layers.KdaState s) {
        Arrays.fill(s.recurrent(), 0.0f);
        Arrays.fill(s.qConv(), 0.0f);
        Arrays.fill(s.kConv(), 0.0f);
        Arrays.fill(s.vConv(), 0.0f);
    }

    /**
     * Empties the state for another sequence: every KDA recurrent state and conv history zeroed, no position absorbed
     * (the MLA rows need no clearing: a feed writes each position's row before anything reads it).
     */
    public void reset() {
        for (Layers.KdaState s : kda) if (s != null) clear(s);
        cached = 0;
    }

    /** Positions already absorbed. */
    public int cached() {
        return cached;
    }

    public int capacity() {
        return capacity;
    }

    /** Layers this state covers. */
    public int layers() {
        return kda.length;
    }

    /** The MLA cache of layer l (null for a KDA layer). */
    public MlaKv mla(int layer) {
        return kv[layer];
    }

    /** Marks positions 0..cached−1 as absorbed, after a saved state's caches were copied in (k3j.state). */
    public void restored(int cached) {
        if (cached < 0 || cached > capacity) throw new IllegalArgumentException("a restored state of " + cached + " positions does not fit the capacity " + capacity);
        this.cached = cached;
    }

    /** The KDA states and the position count at one moment (speculative decoding rolls back to it). */
    record Snapshot(int cached, float[][] kda) {}

    /**
     * Copies what a forward changes in place: every KDA state, and the count. The MLA rows past the count need no
     * copy: the next feed from the restored count rewrites them before anything reads them.
     */
    Snapshot snapshot() {
        List<float[]> copies = new ArrayList<>();
        for (Layers.KdaState s : kda) {
            if (s == null) continue;
            copies.add(s.recurrent().clone());
            copies.add(s.qConv().clone());
            copies.add(s.kConv().clone());
            copies.add(s.vConv().clone());
        }
        return new Snapshot(cached, copies.toArray(float[][]::new));
    }

    void restore(Snapshot snap) {
        int i = 0;
        for (Layers.KdaState s : kda) {
            if (s == null) continue;
            for (float[] a : new float[][] {s.recurrent(), s.qConv(), s.kConv(), s.vConv()}) {
                float[] from = snap.kda()[i++];
                System.arraycopy(from, 0, a, 0, a.length);
            }
        }
        cached = snap.cached();
    }

    /** The KDA state of layer l (null for an MLA layer). */
    public Layers.KdaState kda(int layer) {
        return kda[layer];
    }
}
