package k3j.trunk;

import java.util.Locale;

/**
 * The trunk's counters. {@code pinnedHits + ringHits + misses} = completed acquires (a failed acquire counts
 * nothing). Read time is device time bracketing the read loops only, on either thread; {@code waitNanos}
 * is what acquire spent blocked on the reader thread and {@code callerReadNanos} what it spent reading
 * itself, so read time minus both is read time hidden behind compute. {@code widenNanos} is what the binder
 * reported spending widening this trunk's tensors ({@link TrunkSource#recordWiden}).
 */
public record TrunkStats(int layers, int pinned, int ring, boolean direct, boolean readerThread,
                         long pinnedHits, long ringHits, long misses, long reads, long prefetchReads, long failedReads,
                         long bytesRead, long readNanos, long callerReadNanos, long waitNanos, long acquireNanos,
                         long widenNanos) {

    public long hits() {
        return pinnedHits + ringHits;
    }

    public long binds() {
        return hits() + misses;
    }

    public double hitRate() {
        return binds() == 0 ? 0 : (double) hits() / binds();
    }

    /** Read time that overlapped compute on the reader thread. */
    public long overlappedNanos() {
        return Math.max(0, readNanos - callerReadNanos - waitNanos);
    }

    /** The final report block (docs/semantics.md §5.7). */
    public String report() {
        StringBuilder b = new StringBuilder("trunk [final]\n");
        b.append(String.format(Locale.ROOT, "  pinned %d/%d layers, ring %d slots%s%n", pinned, layers, ring,
                readerThread ? "" : " (no reader thread)"));
        b.append(String.format(Locale.ROOT, "  binds %d, hits %d (%.1f%%), reads %d  [hits: %d pinned, %d ring; reads: %d prefetched]%s%n",
                binds(), hits(), 100 * hitRate(), reads, pinnedHits, ringHits, prefetchReads,
                failedReads > 0 ? ", FAILED reads " + failedReads : ""));
        double rs = readNanos / 1e9;
        b.append(String.format(Locale.ROOT, "  read %s in %.2f s (%.0f MB/s)%s%n", k3j.plan.Human.bytes(bytesRead), rs,
                rs > 0 ? bytesRead / 1e6 / rs : 0.0, direct ? " with O_DIRECT" : " buffered"));
        double bind = (acquireNanos + widenNanos) / 1e9, wait = waitNanos / 1e9, own = callerReadNanos / 1e9, widen = widenNanos / 1e9;
        if (rs > own + wait + 1e-9) {
            double over = overlappedNanos() / 1e9;
            b.append(String.format(Locale.ROOT, "  bind wall %.2f s (waited %.2f s for the reader, read %.2f s itself, widen %.2f s); "
                    + "of the read time %.2f s (%.1f%%) overlapped compute on the reader thread%n",
                    bind, wait, own, widen, over, rs > 0 ? 100 * over / rs : 0.0));
        } else {
            b.append(String.format(Locale.ROOT, "  bind wall %.2f s = read %.2f s + waited %.2f s + widen %.2f s + other %.2f s%n",
                    bind, own, wait, widen, Math.max(0, bind - own - wait - widen)));
        }
        return b.toString();
    }
}
