package k3j.cache;

/** The replacement policies (docs/semantics.md §6.3): S3-FIFO is the default, LRU the README's original. */
public enum CachePolicy {
    S3_FIFO("S3-FIFO"), LRU("LRU");

    private final String label;

    CachePolicy(String label) {
        this.label = label;
    }

    public String label() {
        return label;
    }

    ReplacementPolicy create(int slots) {
        return switch (this) {
            case S3_FIFO -> new ReplacementPolicy.S3Fifo(slots);
            case LRU -> new ReplacementPolicy.Lru(slots);
        };
    }

    /** {@code lru} or {@code s3-fifo} (any case, {@code _} for {@code -}). */
    public static CachePolicy parse(String s) {
        return switch (s.trim().toLowerCase(java.util.Locale.ROOT).replace('_', '-')) {
            case "lru" -> LRU;
            case "s3-fifo", "s3fifo" -> S3_FIFO;
            default -> throw new IllegalArgumentException("unknown cache policy '" + s + "' (lru or s3-fifo)");
        };
    }
}
