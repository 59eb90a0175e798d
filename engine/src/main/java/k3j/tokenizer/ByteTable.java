package k3j.tokenizer;

import java.util.Arrays;

/**
 * Token bytes → rank, looked up by a slice of a larger array without copying it (the BPE loop asks for every
 * adjacent pair of parts). Open addressing over a power-of-two table; ranks are 0..size−1.
 */
final class ByteTable {
    private final byte[][] tokens;   // rank → bytes
    private final int[] slots;       // hash slot → rank + 1 (0 = empty)
    private final int mask;

    ByteTable(byte[][] tokens) {
        this.tokens = tokens;
        int cap = Integer.highestOneBit(Math.max(16, tokens.length * 2 - 1)) << 1;
        slots = new int[cap];
        mask = cap - 1;
        for (int rank = 0; rank < tokens.length; rank++) {
            byte[] t = tokens[rank];
            int s = hash(t, 0, t.length) & mask;
            while (slots[s] != 0) {
                if (Arrays.equals(tokens[slots[s] - 1], t)) throw new IllegalArgumentException("duplicate token bytes at ranks " + (slots[s] - 1) + " and " + rank);
                s = (s + 1) & mask;
            }
            slots[s] = rank + 1;
        }
    }

    int size() {
        return tokens.length;
    }

    byte[] bytes(int rank) {
        return tokens[rank];
    }

    /** The rank of {@code b[from, to)}, or −1 when those bytes are no token. */
    int rank(byte[] b, int from, int to) {
        int s = hash(b, from, to) & mask;
        for (int r; (r = slots[s]) != 0; s = (s + 1) & mask) {
            byte[] t = tokens[r - 1];
            if (Arrays.equals(t, 0, t.length, b, from, to)) return r - 1;
        }
        return -1;
    }

    private static int hash(byte[] b, int from, int to) {
        int h = 0x811C9DC5;
        for (int i = from; i < to; i++) h = (h ^ (b[i] & 0xFF)) * 0x01000193;
        return h ^ (h >>> 16);
    }
}
