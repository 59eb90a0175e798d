package k3j.harness;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.IdentityHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertReader;

/**
 * Wraps the real reader: counts reads per expert, the most reads of one expert ever in flight at
 * once, and can inject a failure (after scribbling garbage into the slot, as a partial read would).
 */
public final class RecordingExpertReader implements ExpertReader {
    public interface Fault {
        boolean fail(int key, int attempt);
    }

    private final ExpertReader real;
    private final Map<ExpertLocation, Integer> keyOf = new IdentityHashMap<>();
    private final Map<Integer, AtomicInteger> reads = new ConcurrentHashMap<>();
    private final Map<Integer, AtomicInteger> inFlight = new ConcurrentHashMap<>();
    private final AtomicInteger maxInFlightPerKey = new AtomicInteger();
    private final AtomicInteger contiguousReads = new AtomicInteger();
    private final long delayMillis;
    private volatile Fault fault = (k, a) -> false;

    public RecordingExpertReader(ExpertReader real, SyntheticExpertShard shard, long delayMillis) {
        this.real = real;
        this.delayMillis = delayMillis;
        for (int l = 0; l < shard.layers; l++) {
            for (int e = 0; e < shard.experts; e++) keyOf.put(shard.location(l, e), l * shard.experts + e);
        }
    }

    public void inject(Fault f) {
        fault = f;
    }

    @Override
    public long read(ExpertLocation loc, MemorySegment slot) throws IOException {
        Integer key = keyOf.get(loc);
        if (key == null) throw new IllegalStateException("the cache asked for a location the shard never handed out");
        int attempt = reads.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
        AtomicInteger now = inFlight.computeIfAbsent(key, k -> new AtomicInteger());
        maxInFlightPerKey.accumulateAndGet(now.incrementAndGet(), Math::max);
        try {
            if (delayMillis > 0) Thread.sleep(delayMillis);
            if (fault.fail(key, attempt)) {
                slot.asSlice(0, Math.min(slot.byteSize(), loc.length() / 2)).fill((byte) 0x5A);
                throw new IOException("injected failure reading key " + key + " (attempt " + attempt + ")");
            }
            if (loc.contiguous()) contiguousReads.incrementAndGet();
            return real.read(loc, slot);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        } finally {
            now.decrementAndGet();
        }
    }

    public ExpertReader real() {
        return real;
    }

    public int reads(int key) {
        AtomicInteger n = reads.get(key);
        return n == null ? 0 : n.get();
    }

    public int totalReads() {
        return reads.values().stream().mapToInt(AtomicInteger::get).sum();
    }

    public int maxInFlightPerKey() {
        return maxInFlightPerKey.get();
    }

    public int contiguousReads() {
        return contiguousReads.get();
    }

    @Override
    public void close() throws IOException {
        real.close();
    }
}
