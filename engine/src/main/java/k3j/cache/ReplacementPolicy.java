package k3j.cache;

import java.util.ArrayDeque;
import java.util.LinkedHashSet;
import java.util.Locale;

/**
 * Chooses which slot a new expert takes (docs/semantics.md §6.3). Called only under the cache lock, by
 * {@link SlotTable}, which owns slot states and the protection ring; a policy never returns an
 * INFLIGHT, pinned or protected slot.
 */
sealed interface ReplacementPolicy permits ReplacementPolicy.Lru, ReplacementPolicy.S3Fifo, ReplacementPolicy.WindowLfu {

    /** A slot to load into (EMPTY, or a resident victim whose key the table then unmaps), or −1. */
    int victim(SlotTable t);

    /** The slot was reserved INFLIGHT. */
    void reserved(int slot);

    /** A full read landed: {@code key} is now resident in {@code slot}; {@code byPrefetch}: no request asked for it yet. */
    void admitted(int slot, int key, boolean byPrefetch);

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
        public void admitted(int slot, int key, boolean byPrefetch) {
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
        public void admitted(int slot, int key, boolean byPrefetch) {
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

    /**
     * Window-LFU: a small LRU window for repeats close together, and LFU over the rest by REUSE EPISODES.
     * A request opens a new episode of its key when the key's previous request is more than {@code window}
     * requests back; repeats inside one episode (the same expert for several tokens of one layer) are the
     * window's to catch and do not make a key look hot. Every new key enters the window; when the window
     * is full its least recently used key either moves to the main part, if it has had more episodes than
     * main's victim (fewest episodes, then least recently used), or is evicted itself. So a cache smaller
     * than the loop it serves keeps a stable set of the keys that keep coming back instead of thrashing,
     * and one larger than it fills like LRU. Counts are of past requests only (no future knowledge).
     */
    final class WindowLfu implements ReplacementPolicy {
        private final int window;
        private final boolean[] inWindow;
        private final int[] keyAt;
        private final long[] usedAt;
        private final int[] episodes;
        private final long[] lastRequest;
        private long clock;
        private long requests;
        private int windowed;

        /** {@code slots} slots for {@code keys} distinct keys; a window of 6 x {@code topK} slots (at most a quarter of the cache). */
        WindowLfu(int slots, int keys, int topK) {
            window = Math.max(1, Math.min(6 * topK, slots / 4));
            inWindow = new boolean[slots];
            keyAt = new int[slots];
            java.util.Arrays.fill(keyAt, -1);
            usedAt = new long[slots];
            episodes = new int[keys];
            lastRequest = new long[keys];
            java.util.Arrays.fill(lastRequest, Long.MIN_VALUE / 2);
        }

        private void request(int key) {
            long now = ++requests;
            if (now - lastRequest[key] > window && episodes[key] < Integer.MAX_VALUE) episodes[key]++;
            lastRequest[key] = now;
        }

        /** Fewer episodes, then older use: the main part's order of eviction. */
        private boolean colder(int a, int b) {
            int ea = episodes[keyAt[a]], eb = episodes[keyAt[b]];
            return ea != eb ? ea < eb : usedAt[a] < usedAt[b];
        }

        @Override
        public int victim(SlotTable t) {
            int oldestWindow = -1, coldestMain = -1;
            for (int s = 0; s < inWindow.length; s++) {
                int k = t.keyOf(s);
                if (k == SlotTable.INFLIGHT) continue;
                if (k == SlotTable.EMPTY) return s;
                if (!t.evictable(s)) continue;
                if (inWindow[s]) {
                    if (oldestWindow < 0 || usedAt[s] < usedAt[oldestWindow]) oldestWindow = s;
                } else if (coldestMain < 0 || colder(s, coldestMain)) {
                    coldestMain = s;
                }
            }
            if (oldestWindow >= 0 && coldestMain >= 0 && windowed >= window) {
                if (episodes[keyAt[oldestWindow]] <= episodes[keyAt[coldestMain]]) return oldestWindow;
                leaveWindow(oldestWindow);
                return coldestMain;
            }
            return coldestMain >= 0 ? coldestMain : oldestWindow;
        }

        private void leaveWindow(int slot) {
            if (inWindow[slot]) {
                inWindow[slot] = false;
                windowed--;
            }
        }

        /** The new key enters the window as soon as its slot is reserved, so a batch's reservations see the window they will fill. */
        @Override
        public void reserved(int slot) {
            keyAt[slot] = -1;
            usedAt[slot] = ++clock;
            if (inWindow[slot]) return;
            inWindow[slot] = true;
            if (++windowed > window) {
                // the cold fill: the window's oldest moves on to the main part while there is room
                int oldest = -1;
                for (int s = 0; s < inWindow.length; s++) {
                    if (inWindow[s] && s != slot && (oldest < 0 || usedAt[s] < usedAt[oldest])) oldest = s;
                }
                if (oldest >= 0) leaveWindow(oldest);
            }
        }

        @Override
        public void admitted(int slot, int key, boolean byPrefetch) {
            if (!byPrefetch) request(key);
            keyAt[slot] = key;
            usedAt[slot] = ++clock;
        }

        @Override
        public void hit(int slot, boolean firstUse) {
            request(keyAt[slot]);
            usedAt[slot] = ++clock;
        }

        @Override
        public void freed(int slot) {
            leaveWindow(slot);
            keyAt[slot] = -1;
        }

        @Override
        public String describe() {
            return "  policy       : window-LFU\n"
                    + String.format(Locale.ROOT, "                 window %d of %d slots, main %d", windowed, window, inWindow.length - windowed);
        }
    }
}
