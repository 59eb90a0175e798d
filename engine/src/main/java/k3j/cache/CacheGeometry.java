package k3j.cache;

import java.util.Locale;
import k3j.io.DirectIo;
import k3j.plan.Human;

/**
 * Slot geometry (docs/semantics.md §6.1). A slot holds the probe expert plus 2·4096 bytes of O_DIRECT
 * widening, rounded up to 4096, so every slot base is 4096-aligned (pitfall 18: K3's
 * 17,547,264-byte expert is aligned by coincidence, the stride must not rely on it).
 */
public record CacheGeometry(long expertBytes, long slotBytes, int slots, int topK) {
    public static final long ALIGN = DirectIo.ALIGN;
    /** K3 (93 layers, the dense layer 0 excluded) × 896 experts: the denominator of the printed pool share. */
    public static final long K3_POOL_EXPERTS = 92L * 896;

    public static long slotBytes(long expertBytes) {
        return DirectIo.alignUp(expertBytes + 2 * ALIGN);
    }

    /** nslot = floor(budget / slot); a cache smaller than one token's working set is refused. */
    public static CacheGeometry plan(long expertBytes, long budgetBytes, int topK) {
        return plan(expertBytes, budgetBytes, topK, Long.MAX_VALUE);
    }

    /**
     * As {@link #plan(long, long, int)}, with at most {@code poolExperts} slots: a budget larger than every expert
     * the model has buys slots that can never fill, so the cache (and the plan's line for it) takes only what the
     * model's own experts need.
     */
    public static CacheGeometry plan(long expertBytes, long budgetBytes, int topK, long poolExperts) {
        if (expertBytes <= 0) throw new IllegalArgumentException("expert size must be positive, got " + expertBytes);
        if (topK < 1) throw new IllegalArgumentException("top-k must be at least 1, got " + topK);
        if (budgetBytes < 0) throw new IllegalArgumentException("cache budget must not be negative, got " + budgetBytes);
        if (poolExperts < 1) throw new IllegalArgumentException("the expert pool must not be empty, got " + poolExperts);
        long slot = slotBytes(expertBytes);
        long n = Math.min(budgetBytes / slot, poolExperts);
        if (n < Math.min(topK + 1, poolExperts)) {
            throw new IllegalArgumentException(String.format(Locale.ROOT,
                    "expert cache of %s holds %d slots of %s; it needs at least %d (top-k + 1 = %s). "
                            + "A cache smaller than one token's working set would evict an expert that is still being multiplied.",
                    Human.bytes(budgetBytes), n, Human.bytes(slot), topK + 1, Human.bytes((topK + 1) * (double) slot)));
        }
        if (n > Integer.MAX_VALUE / 2) throw new IllegalArgumentException("expert cache of " + n + " slots is too many");
        return new CacheGeometry(expertBytes, slot, (int) n, topK);
    }

    public long arenaBytes() {
        return slotBytes * slots;
    }

    /** How many handed-out slots are protected from eviction: min(topk, 64, nslot − 1, ≥ 1) (§6.3). */
    public int protectedSlots() {
        return protectedSlots(topK, slots);
    }

    public static int protectedSlots(int topK, int slots) {
        return Math.max(1, Math.min(Math.min(topK, 64), slots - 1));
    }

    /** {@code expert cache: %d slots x %.2f MB = %.2f GB (%.2f%% of the 1.45 TB expert pool)} (§6.1). */
    public String banner() {
        return String.format(Locale.ROOT, "expert cache: %d slots x %.2f MB = %.2f GB (%.2f%% of the 1.45 TB expert pool)",
                slots, slotBytes / 1e6, arenaBytes() / 1e9, 100.0 * slots / K3_POOL_EXPERTS);
    }
}
