package k3j.cache;

import java.util.ArrayDeque;
import java.util.LinkedHashSet;
import java.util.Locale;

/**
 * Chooses which slot a new expert takes (docs/semantics.md §6.3). Called only under the cache lock, by
 * {@link SlotTable}, which owns slot states and the protection ring; a policy never returns an
 * INFLIGHT, pinned or protected slot.
 */
sealed interface ReplacementPolicy permits ReplacementPolicy.Lru, ReplacementPolicy.S3Fifo {

    /** A slot to load into (EMPTY, or a resident victim whose key the table then unmaps), or −1. */
    int victim(SlotTable t);

    /** The slot was reserved INFLIGHT. */
    void reserved(int slot);

    /** A full read landed: {@code key} is now resident in {@code slot}. */
    void admitted(int slot, int key);

    /**
     * A request was served from {@code slot}. {@code firstUse} is the first request for an expert
     * the batch prefetch brought in: it is the request that admitted it, not a repeat.
     */
    void hit(int slot, boolean firstUse);

    /** A failed read: the slot is EMPTY again. */
    void freed(int slot);

    /** The policy line(s) of the report. */
    String describe();

    /** README's LRU: the first EMPTY slot, else the evictable slot with the oldest use stamp. */
    final class Lru implements ReplacementPolicy {
        private final long[] usedAt;
        private long clock;

        Lru(int slots) {
            usedAt = new long[slots];
        }

        @Override
        public int victim(SlotTable t) {
            int best = -1;
            long oldest = Long.MAX_VALUE;
            for (int s = 0; s < usedAt.length; s++) {
                int k = t.keyOf(s);
                if (k == SlotTable.INFLIGHT) continue;
                if (k == SlotTable.EMPTY) return s;
                if (t.evictable(s) && usedAt[s] < oldest) {
                    oldest = usedAt[s];
                    best = s;
                }
            }
            return best;
        }

        @Override
        public void reserved(int slot) {
            usedAt[slot] = ++clock;
        }

        @Override
        public void admitted(int slot, int key) {
            usedAt[slot] = ++clock;
        }

        @Override
        public void hit(int slot, boolean firstUse) {
            usedAt[slot] = ++clock;
        }

        @Override
        public void freed(int slot) {}

        @Override
        public String describe() {
            return "  policy       : LRU";
        }
    }

    /**
     * S3-FIFO: a free list for the cold fill, a SMALL and a MAIN FIFO, a saturating 2-bit frequency
     * per slot and a ghost FIFO of keys recently evicted from SMALL (capacity nslot). A ghost key
     * that comes back is admitted straight to MAIN. The ghost is an insertion-ordered set, so
     * membership is exact and re-admission removes the key from the FIFO too.
     */
    final class S3Fifo implements ReplacementPolicy {
        private final int slots;
        private final int smallTarget;
        private final ArrayDeque<Integer> free = new ArrayDeque<>();
        private final ArrayDeque<Integer> small = new ArrayDeque<>();
        private final ArrayDeque<Integer> main = new ArrayDeque<>();
        private final LinkedHashSet<Integer> ghost = new LinkedHashSet<>();
        private final byte[] freq;
        private final long[] bouncedIn;
        private long call;

        S3Fifo(int slots) {
            this.slots = slots;
            this.smallTarget = Math.max(1, slots / 10);
            this.freq = new byte[slots];
            this.bouncedIn = new long[slots];
            for (int s = 0; s < slots; s++) free.addLast(s);
        }

        @Override
        public int victim(SlotTable t) {
            if (!free.isEmpty()) return free.pollFirst();
            call++;
            int smallBounces = 0, mainBounces = 0;
            // §6.3 guards the loop at 4·nslot + 8 steps; that can stop short of an evictable entry (moving
            // SMALL entries up costs ≤ nslot steps, then MAIN may take four aging rounds with protected
            // entries re-popped each round), so the guard here is 16·nslot + 64: every step either
            // ages an entry, moves it, or re-pops one of at most nslot protected entries per round
            for (int step = 0, guard = 16 * slots + 64; step < guard; step++) {
                boolean smallLive = small.size() > smallBounces, mainLive = main.size() > mainBounces;
                boolean fromSmall;
                if (smallLive && small.size() >= smallTarget) fromSmall = true;
                else if (mainLive) fromSmall = false;
                else if (smallLive) fromSmall = true;
                else return -1;
                ArrayDeque<Integer> q = fromSmall ? small : main;
                int s = q.pollFirst();
                if (!t.evictable(s)) {
                    q.addLast(s);
                    // count each protected entry once per call: it comes round again after the
                    // others have been aged, and counting it twice would give up too early
                    if (bouncedIn[s] != call) {
                        bouncedIn[s] = call;
                        if (fromSmall) smallBounces++;
                        else mainBounces++;
                    }
                    continue;
                }
                if (freq[s] > 0) {
                    if (fromSmall) freq[s] = 0;
                    else freq[s]--;
                    main.addLast(s);
                    continue;
                }
                if (fromSmall) {
                    if (ghost.size() >= slots) ghost.removeFirst();
                    ghost.addLast(t.keyOf(s));
                }
                return s;
            }
            return -1;
        }

        @Override
        public void reserved(int slot) {}

        @Override
        public void admitted(int slot, int key) {
            freq[slot] = 0;
            if (ghost.remove(key)) main.addLast(slot);
            else small.addLast(slot);
        }

        @Override
        public void hit(int slot, boolean firstUse) {
            if (!firstUse && freq[slot] < 3) freq[slot]++;
        }

        @Override
        public void freed(int slot) {
            free.addLast(slot);
        }

        @Override
        public String describe() {
            return "  policy       : S3-FIFO (small/main/ghost)\n"
                    + String.format(Locale.ROOT, "                 small %d of %d target, main %d, ghost %d keys",
                    small.size(), smallTarget, main.size(), ghost.size());
        }
    }
}
