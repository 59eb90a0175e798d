package k3j.cache;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * Replays a get() trace (docs/semantics.md §9) at a given number of slots and counts hits. LRU and S3-FIFO
 * drive the engine's own {@link SlotTable} and policies, protection ring included, so a replay at
 * the live cache's slot count and top-k gives the live cache's hits exactly when it ran without
 * batch prefetch. Belady (with bypass) and PIN+LRU are the §9 bounds.
 */
public final class CacheSimulator {
    private final int[] keys;
    private final int distinct;
    private final int[] pairs;

    /** {@code pairs}: flattened (layer, expert) requests, as {@link CacheTrace#readPairs} returns them. */
    public CacheSimulator(int[] pairs) {
        if (pairs.length % 2 != 0) throw new IllegalArgumentException("a trace is (layer, expert) pairs; got an odd count " + pairs.length);
        this.pairs = pairs.clone();
        Map<Long, Integer> dense = new HashMap<>();
        keys = new int[pairs.length / 2];
        for (int i = 0; i < keys.length; i++) {
            long k = ((long) pairs[2 * i] << 32) | (pairs[2 * i + 1] & 0xffffffffL);
            keys[i] = dense.computeIfAbsent(k, x -> dense.size());
        }
        distinct = dense.size();
    }

    public int requests() {
        return keys.length;
    }

    public int distinct() {
        return distinct;
    }

    /** Σ(count − 1): requests that repeat an earlier one. */
    public long repeats() {
        return keys.length - distinct;
    }

    /** Request counts per (layer, expert), hottest first (ties: first requested first). */
    public long[][] hottest(int n) {
        long[] counts = counts();
        int[] firstAt = new int[distinct];
        Arrays.fill(firstAt, -1);
        for (int i = 0; i < keys.length; i++) if (firstAt[keys[i]] < 0) firstAt[keys[i]] = i;
        Integer[] order = byFrequency(counts, firstAt);
        long[][] out = new long[Math.min(n, distinct)][];
        for (int i = 0; i < out.length; i++) {
            int f = firstAt[order[i]];
            out[i] = new long[] {pairs[2 * f], pairs[2 * f + 1], counts[order[i]]};
        }
        return out;
    }

    private long[] counts() {
        long[] c = new long[distinct];
        for (int k : keys) c[k]++;
        return c;
    }

    private static Integer[] byFrequency(long[] counts, int[] firstAt) {
        Integer[] order = new Integer[counts.length];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, (a, b) -> counts[a] != counts[b] ? Long.compare(counts[b], counts[a]) : Integer.compare(firstAt[a], firstAt[b]));
        return order;
    }

    /** What a replay of the engine's cache counted: hits, and the reads the batch prefetch made. */
    public record Replay(long hits, long prefetchReads) {
        /** Hits on experts that were resident before their batch asked: hits − prefetch reads. */
        public long trueHits() {
            return Math.max(hits - prefetchReads, 0);
        }
    }

    /**
     * The engine's policy over {@code slots} slots with the protection ring of min(topK, 64, slots − 1).
     * Serial: one get() per request, the cache run without batch prefetch. Batched: each run of
     * consecutive same-layer requests (cut every topK) is first prefetched as the MoE's getMany
     * does, then requested; the trace does not mark batches, so this reconstructs them.
     */
    public Replay engine(CachePolicy policy, int slots, int topK, boolean batched) {
        if (slots < 1) throw new IllegalArgumentException("slots must be at least 1");
        SlotTable t = new SlotTable(slots, distinct, CacheGeometry.protectedSlots(topK, slots), policy);
        long hits = 0, prefetched = 0;
        for (int start = 0; start < keys.length; ) {
            int end = start + 1;
            if (batched) {
                while (end < keys.length && end - start < topK && pairs[2 * end] == pairs[2 * start]) end++;
                int[] batch = Arrays.copyOfRange(keys, start, end);
                for (SlotTable.Reservation r : t.reserveBatch(batch)) {
                    t.publish(r.slot(), r.key(), true);
                    prefetched++;
                }
            }
            for (int i = start; i < end; i++) {
                int k = keys[i];
                int s = t.residentSlot(k);
                if (s >= 0) {
                    hits++;
                    t.serve(s);
                    continue;
                }
                SlotTable.Reservation r = t.reserve(k);
                if (r == null) continue; // every slot protected: the live cache fails this request too
                t.publish(r.slot(), k, false);
                t.handOut(r.slot());
            }
            start = end;
        }
        return new Replay(hits, prefetched);
    }

    /** Belady's optimum with bypass: a key whose next use is later than every resident key's is not cached. */
    public long belady(int cap) {
        int n = keys.length;
        int[] next = new int[n];
        int[] seen = new int[distinct];
        Arrays.fill(seen, -1);
        for (int i = n - 1; i >= 0; i--) {
            next[i] = seen[keys[i]];
            seen[keys[i]] = i;
        }
        // a resident key is stored as its next use; "never again" is n + key, unique and beyond every index
        long[] current = new long[distinct];
        Arrays.fill(current, -1);
        TreeSet<Long> resident = new TreeSet<>();
        long hits = 0;
        for (int i = 0; i < n; i++) {
            int k = keys[i];
            long nu = next[i] >= 0 ? next[i] : (long) n + k;
            if (current[k] >= 0) {
                hits++;
                resident.remove(current[k]);
                resident.add(nu);
                current[k] = nu;
                continue;
            }
            if (resident.size() >= cap) {
                long far = resident.last();
                if (far < nu) continue; // bypass
                resident.pollLast();
                current[far < n ? keys[(int) far] : (int) (far - n)] = -1;
            }
            resident.add(nu);
            current[k] = nu;
        }
        return hits;
    }

    /** The cap/2 most frequent keys of this trace pinned (future knowledge: an upper bound), LRU over the rest. */
    public long pinnedLru(int cap) {
        int npin = Math.min(cap / 2, cap - 1);
        int room = Math.max(cap - npin, 1);
        long[] counts = counts();
        int[] firstAt = new int[distinct];
        Arrays.fill(firstAt, -1);
        for (int i = 0; i < keys.length; i++) if (firstAt[keys[i]] < 0) firstAt[keys[i]] = i;
        Integer[] order = byFrequency(counts, firstAt);
        boolean[] hot = new boolean[distinct];
        for (int i = 0; i < Math.min(npin, distinct); i++) hot[order[i]] = true;
        boolean[] touched = new boolean[distinct];
        LinkedHashMap<Integer, Boolean> lru = new LinkedHashMap<>(16, 0.75f, true);
        long hits = 0;
        for (int k : keys) {
            if (hot[k]) {
                if (touched[k]) hits++;
                touched[k] = true;
                continue;
            }
            if (lru.get(k) != null) {
                hits++;
                continue;
            }
            if (lru.size() >= room) {
                Iterator<Integer> it = lru.keySet().iterator();
                it.next();
                it.remove();
            }
            lru.put(k, Boolean.TRUE);
        }
        return hits;
    }

    /** Hits of one capacity under the engine's policies and the two bounds; the engine's count TRUE hits (hits − prefetch reads; plain hits when not batched). */
    public record Row(String label, int slots, long lru, long s3fifo, long windowLfu, long belady, long pinnedLru) {
        /** The engine policy's hits. */
        public long of(CachePolicy p) {
            return switch (p) {
                case LRU -> lru;
                case S3_FIFO -> s3fifo;
                case WINDOW_LFU -> windowLfu;
            };
        }
    }

    public Row row(String label, int slots, int topK, boolean batched) {
        return new Row(label, slots, engine(CachePolicy.LRU, slots, topK, batched).trueHits(),
                engine(CachePolicy.S3_FIFO, slots, topK, batched).trueHits(), engine(CachePolicy.WINDOW_LFU, slots, topK, batched).trueHits(),
                belady(slots), pinnedLru(slots));
    }

}
