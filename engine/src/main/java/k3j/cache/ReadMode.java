package k3j.cache;

/** How expert bytes come off the disk (docs/semantics.md §6.7). */
public enum ReadMode {
    /** O_DIRECT, widened to 4096-aligned windows; buffered where the filesystem refuses it. */
    DIRECT,
    /** Positional reads through the page cache, pad = 0. */
    BUFFERED
}
