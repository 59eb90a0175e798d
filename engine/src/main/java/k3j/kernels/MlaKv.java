package k3j.kernels;

/**
 * One MLA layer's expanded key/value cache in the attention core's layout (docs/semantics.md §3.14 caches expanded
 * per-head keys and values plus ONE shared rope key per position). Positions are grouped in blocks of 16
 * so the fast path reads keys with lanes = positions from contiguous memory:
 * keys  [heads][cap/16][nope][16]   (key-nope of head h, position s, dim i)
 * rope  [cap/16][rope][16]          (the un-rotated rope key, shared by all heads)
 * values [heads][cap][value]        (value of head h, position s).
 */
public final class MlaKv {
    public static final int BLOCK = 16;

    final int heads, nope, rope, value, capacity;
    final float[] keys, ropeKeys, values;

    public MlaKv(int heads, int nope, int rope, int value, int capacity) {
        if (heads <= 0 || nope <= 0 || rope < 0 || value <= 0 || capacity <= 0) {
            throw new IllegalArgumentException("MLA cache geometry must be positive: heads " + heads + " nope " + nope + " rope " + rope + " value " + value + " capacity " + capacity);
        }
        this.heads = heads;
        this.nope = nope;
        this.rope = rope;
        this.value = value;
        this.capacity = (capacity + BLOCK - 1) / BLOCK * BLOCK;
        long k = (long) heads * this.capacity * nope, v = (long) heads * this.capacity * value;
        if (k > Integer.MAX_VALUE - 16 || v > Integer.MAX_VALUE - 16) {
            throw new IllegalArgumentException("MLA cache of " + this.capacity + " positions exceeds one array per layer");
        }
        this.keys = new float[(int) k];
        this.ropeKeys = new float[this.capacity * rope];
        this.values = new float[(int) v];
    }

    public int capacity() {
        return capacity;
    }

    /**
     * Stores position s: kv [heads][nope + value] (per head key-nope then value, kv_b's row order) at kvOff,
     * and the shared rope key [rope] at ropeOff.
     */
    public void put(int s, float[] kv, int kvOff, float[] ropeKey, int ropeOff) {
        if (s < 0 || s >= capacity) throw new IllegalArgumentException("MLA KV cache position " + s + " exceeds the limit " + capacity);
        int blk = s / BLOCK, lane = s % BLOCK, kvd = nope + value;
        for (int h = 0; h < heads; h++) {
            int kb = ((h * (capacity / BLOCK) + blk) * nope) * BLOCK + lane;
            for (int i = 0; i < nope; i++) keys[kb + i * BLOCK] = kv[kvOff + h * kvd + i];
            System.arraycopy(kv, kvOff + h * kvd + nope, values, (h * capacity + s) * value, value);
        }
        for (int i = 0; i < rope; i++) ropeKeys[(blk * rope + i) * BLOCK + lane] = ropeKey[ropeOff + i];
    }

    /** Floats per position in {@link #put}'s kv layout (heads × (nope + value)) and in its rope key. */
    public int kvWidth() {
        return heads * (nope + value);
    }

    public int ropeWidth() {
        return rope;
    }

    /** Position s in {@link #put}'s layout: kv [heads][nope + value] at kvOff, the rope key at ropeOff. */
    public void get(int s, float[] kv, int kvOff, float[] ropeKey, int ropeOff) {
        if (s < 0 || s >= capacity) throw new IllegalArgumentException("MLA KV cache position " + s + " exceeds the limit " + capacity);
        int kvd = nope + value;
        for (int h = 0; h < heads; h++) {
            for (int i = 0; i < nope; i++) kv[kvOff + h * kvd + i] = key(h, s, i);
            System.arraycopy(values, (h * capacity + s) * value, kv, kvOff + h * kvd + nope, value);
        }
        for (int i = 0; i < rope; i++) ropeKey[ropeOff + i] = ropeKey(s, i);
    }

    float key(int h, int s, int i) {
        return keys[((h * (capacity / BLOCK) + s / BLOCK) * nope + i) * BLOCK + s % BLOCK];
    }

    float ropeKey(int s, int i) {
        return ropeKeys[((s / BLOCK) * rope + i) * BLOCK + s % BLOCK];
    }

    float value(int h, int s, int j) {
        return values[(h * capacity + s) * value + j];
    }
}
