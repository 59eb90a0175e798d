package k3j.cache;

import java.util.Locale;

/**
 * {@code prefetchWasted} counts prefetched (or speculated) experts evicted before any get() used
 * them. {@code specReads} are the speculative read-ahead's loads; {@code specUsed} counts ids of
 * a layer's recorded routing that the next routing of that layer asked for again (§6.5).
 *
 * The cache's counters over one window: a generation step, or the whole run (docs/semantics.md §6.8).
 * Every counter of a window is reset together (pitfall 17: prefetch reads reset apart from hits
 * make the TRUE hit rate negative or zero).
 */
public record CacheStats(long requests, long hits, long misses, long evictions, long prefetchReads,
                         long prefetchWasted, long specReads, long specUsed, long failedReads, long bytesRead, long readNanos) {

    public static final CacheStats ZERO = new CacheStats(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);

    public double hitRate() {
        return requests == 0 ? 0 : (double) hits / requests;
    }

    /** Hits that were resident before this window asked: hits − prefetch reads. */
    public long trueHits() {
        return Math.max(hits - prefetchReads, 0);
    }

    public double trueHitRate() {
        return requests == 0 ? 0 : (double) trueHits() / requests;
    }

    public double readSeconds() {
        return readNanos / 1e9;
    }

    /** MB/s while loading (1 MB = 1e6 bytes). */
    public double readMBps() {
        return readNanos == 0 ? 0 : bytesRead / 1e6 / readSeconds();
    }

    CacheStats plus(CacheStats o) {
        return new CacheStats(requests + o.requests, hits + o.hits, misses + o.misses, evictions + o.evictions,
                prefetchReads + o.prefetchReads, prefetchWasted + o.prefetchWasted, specReads + o.specReads, specUsed + o.specUsed, failedReads + o.failedReads, bytesRead + o.bytesRead, readNanos + o.readNanos);
    }

    /** The requests / TRUE hit rate / read lines of the §6.8 report block. */
    String lines() {
        StringBuilder b = new StringBuilder();
        b.append(String.format(Locale.ROOT, "  requests     : %d  hits %d (%.2f%%)  misses %d  evictions %d%n",
                requests, hits, 100 * hitRate(), misses, evictions));
        if (prefetchReads > 0) {
            b.append(String.format(Locale.ROOT, "  of those hits : %d came from the batch prefetch, i.e. read from disk%n", prefetchReads));
            b.append(String.format(Locale.ROOT, "                 this token; TRUE resident hit rate %.2f%%%n", 100 * trueHitRate()));
            if (prefetchWasted > 0) {
                b.append(String.format(Locale.ROOT, "                 %d prefetched expert(s) were evicted before any request used them%n", prefetchWasted));
            }
        }
        if (failedReads > 0) {
            b.append(String.format(Locale.ROOT, "  FAILED reads : %d (never served; each is a dropped expert)%n", failedReads));
        }
        b.append(String.format(Locale.ROOT, "  read from disk: %s in %.2f s (%.0f MB/s while loading)%n",
                k3j.plan.Human.bytes(bytesRead), readSeconds(), readMBps()));
        return b.toString();
    }
}
