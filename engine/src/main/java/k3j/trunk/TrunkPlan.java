package k3j.trunk;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import k3j.plan.Human;

/**
 * How a trunk budget is spent: which layers are PINNED (read once, kept) and how many ring slots of what
 * size stream the rest (docs/semantics.md §5.4). The slot size depends on the largest layer left unpinned and the
 * pinned set on what the ring leaves of the budget, so the two are iterated to a fixed point.
 *
 * <p>Pinning order: LARGEST FIRST by default (ties by layer number). Per token the trunk costs the bytes of
 * the unpinned layers, so pinning the largest runs first maximises the bytes kept per byte of budget, and it
 * shrinks the ring slot to the largest UNPINNED run: on K3, pinning the 2.34 GB dense layer 0 shrinks each
 * slot from 2.37 GB to 1.29 GB. A layer that does not fit is skipped and smaller ones are still tried.
 * {@link Order#PREFIX} (env {@code K3_PIN_PREFIX}) pins 0, 1, 2, ... and stops at the first that does not
 * fit: the README's older rule, kept for A/B runs. Measured on the released layout (TrunkPlanTest.ladder, ring 2,
 * when each slot and pinned layer also held a 25.9 MB widen area, since removed), GB streamed per token, largest first vs prefix: 6 GB budget 107.95 vs 108.79 (only largest
 * first pins anything), 16 GB 96.31 vs 95.89, 32 GB 80.26 vs 80.68, 60 GB 53.22 vs 52.80, 110 GB 3.38 vs 4.22
 * (largest first streams through 0.87 GB slots instead of 1.29 GB): within 0.4 GB either way in the middle,
 * clearly better at both ends. Both are fixed points, not optima (see the test for a case neither finds).
 *
 * <p>Why a pinned SET and not LRU: the walk is a cyclic scan 0..L-1 every token; with fewer slots than layers
 * LRU evicts exactly the layer needed next (hit rate 0 whatever the RAM); pinning K layers gives exactly K/L.
 *
 * @param budget     the trunk budget in bytes
 * @param ringWanted the ring depth asked for (clamped to 1..8)
 * @param ring       the ring depth granted: fewer when the budget cannot hold ringWanted slots (never below 1)
 * @param slotBytes  bytes per ring slot: the largest unpinned run rounded up to 4096
 * @param pinned     pinned[L]: layer L has its own buffer
 * @param pinnedBytes Σ over pinned layers of their runs rounded up to 4096
 * @param passes     fixed-point passes taken (at most {@value #MAX_PASSES})
 */
public record TrunkPlan(long budget, int ringWanted, int ring, long slotBytes, Order order,
                        boolean[] pinned, long pinnedBytes, long[] runBytes, int passes) {
    public static final int MAX_PASSES = 8;
    public static final int MAX_RING = 8;

    public enum Order { LARGEST_FIRST, PREFIX }

    /** Plans a budget over runs of {@code runBytes[L]} bytes. */
    public static TrunkPlan of(long[] runBytes, long budget, int ringWanted, Order order) {
        int n = runBytes.length;
        if (n == 0) throw new IllegalArgumentException("no layers to plan");
        if (budget < 0) throw new IllegalArgumentException("negative budget");
        int want = ringWanted <= 0 ? 2 : Math.min(ringWanted, MAX_RING);
        Integer[] walk = new Integer[n];
        for (int i = 0; i < n; i++) walk[i] = i;
        if (order == Order.LARGEST_FIRST) Arrays.sort(walk, Comparator.comparingLong((Integer i) -> -runBytes[i]).thenComparingInt(i -> i));
        boolean[] chosen = new boolean[n];
        long slot = -1;
        int count = -1, ring = want, passes = 0;
        long spent = 0;
        while (passes < MAX_PASSES) {
            passes++;
            long big = -1;
            for (int i = 0; i < n; i++) if (!chosen[i]) big = Math.max(big, runBytes[i]);
            if (big < 0) big = runBytes[n - 1];
            long newSlot = TrunkManifest.roundUp(big, TrunkManifest.ALIGN);
            ring = want;
            while (ring > 1 && (double) ring * newSlot > budget) ring--;
            boolean[] next = new boolean[n];
            spent = ring * newSlot;
            int newCount = 0;
            for (int i : walk) {
                long need = TrunkManifest.roundUp(runBytes[i], TrunkManifest.ALIGN);
                if (spent + need <= budget) {
                    next[i] = true;
                    spent += need;
                    newCount++;
                } else if (order == Order.PREFIX) {
                    break;
                }
            }
            boolean converged = newSlot == slot && newCount == count;
            slot = newSlot;
            count = newCount;
            chosen = next;
            if (converged) break;
        }
        return new TrunkPlan(budget, want, ring, slot, order, chosen, spent - ring * slot, runBytes.clone(), passes);
    }

    /** The order K3_PIN_PREFIX selects. */
    public static Order orderFromEnvironment() {
        return System.getenv("K3_PIN_PREFIX") != null ? Order.PREFIX : Order.LARGEST_FIRST;
    }

    public int layers() {
        return pinned.length;
    }

    public boolean isPinned(int layer) {
        return pinned[layer];
    }

    public int pinnedCount() {
        int c = 0;
        for (boolean p : pinned) if (p) c++;
        return c;
    }

    public List<Integer> pinnedLayers() {
        List<Integer> out = new ArrayList<>();
        for (int i = 0; i < pinned.length; i++) if (pinned[i]) out.add(i);
        return out;
    }

    /** Bytes the plan allocates: pinned buffers plus ring slots. */
    public long totalBytes() {
        return pinnedBytes + ring * slotBytes;
    }

    /** Σ unpinned runs: what one pass over the layers reads from disk once the pinned set is loaded. */
    public long streamedBytesPerPass() {
        long s = 0;
        for (int i = 0; i < pinned.length; i++) if (!pinned[i]) s += runBytes[i];
        return s;
    }

    public long largestRun() {
        long m = 0;
        for (long r : runBytes) m = Math.max(m, r);
        return m;
    }

    public long largestUnpinnedRun() {
        long m = 0;
        for (int i = 0; i < pinned.length; i++) if (!pinned[i]) m = Math.max(m, runBytes[i]);
        return m;
    }

    /** The startup lines of docs/semantics.md §5.4 (the read method line is the stream's, not the plan's). */
    public String describe() {
        long packed = 0;
        for (long r : runBytes) packed += TrunkManifest.roundUp(r, TrunkManifest.ALIGN);
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "trunk stream: %s packed, %d/%d layers PINNED (%s), ring %d x %s%n",
                Human.bytes(packed), pinnedCount(), layers(), Human.bytes(pinnedBytes), ring, Human.bytes(slotBytes)));
        String how = pinnedCount() == 0 ? "nothing pinned" : order == Order.PREFIX ? "pinned as a PREFIX" : "pinned LARGEST FIRST";
        b.append(String.format(Locale.ROOT, "              %s; largest unpinned run %s of largest %s%n",
                how, Human.bytes(largestUnpinnedRun()), Human.bytes(largestRun())));
        if (ring < ringWanted) {
            b.append(String.format(Locale.ROOT, "              WARNING: ring %d of %d wanted: %d slots need %s of the %s budget%n",
                    ring, ringWanted, ringWanted, Human.bytes((double) ringWanted * slotBytes), Human.bytes(budget)));
        }
        if (ring == 1) b.append("              one ring slot: Reads are NOT overlapped with compute (no reader thread)\n");
        if (totalBytes() > budget) {
            b.append(String.format(Locale.ROOT, "              WARNING: one slot of %s exceeds the %s budget%n", Human.bytes(slotBytes), Human.bytes(budget)));
        }
        b.append(String.format(Locale.ROOT, "              deterministic hit rate %.1f%% (a cyclic scan defeats LRU, so a pinned SET is used instead)%n",
                100.0 * pinnedCount() / layers()));
        return b.toString();
    }
}
