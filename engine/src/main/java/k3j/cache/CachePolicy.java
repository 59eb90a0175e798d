package k3j.cache;

/** The replacement policies (docs/semantics.md §6.3): window-LFU is the default (the closest to Belady on a real trace), S3-FIFO the previous one, LRU the README's original. */
public enum CachePolicy {
    S3_FIFO("S3-FIFO"), LRU("LRU"), WINDOW_LFU("window-LFU");

    private final String label;

    CachePolicy(String label) {
        this.label = label;
    }

    public String label() {
        return label;
    }

    /** A policy for {@code slots} slots, {@code keys} distinct keys, {@code topK} experts per token (the protection ring). */
    ReplacementPolicy create(int slots, int keys, int topK) {
        return switch (this) {
            case S3_FIFO -> new ReplacementPolicy.S3Fifo(slots);
            case LRU -> new ReplacementPolicy.Lru(slots);
            case WINDOW_LFU -> new ReplacementPolicy.WindowLfu(slots, keys, topK);
        };
    }

    /** {@code lru}, {@code s3-fifo} or {@code window-lfu} (any case, {@code _} for {@code -}). */
    public static CachePolicy parse(String s) {
        return switch (s.trim().toLowerCase(java.util.Locale.ROOT).replace('_', '-')) {
            case "lru" -> LRU;
            case "s3-fifo", "s3fifo" -> S3_FIFO;
            case "window-lfu", "wlfu" -> WINDOW_LFU;
            default -> throw new IllegalArgumentException("unknown cache policy '" + s + "' (lru, s3-fifo or window-lfu)");
        };
    }
}
