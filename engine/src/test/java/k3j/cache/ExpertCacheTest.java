package k3j.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class ExpertCacheTest {
    /** Four experts of 100 bytes in six parts, 1000 bytes apart in a file that is never opened. */
    static final class FakeLocator implements ExpertLocator {
        @Override public int layers() { return 1; }
        @Override public int experts() { return 4; }
        @Override public int probeLayer() { return 0; }

        @Override
        public ExpertLocation locate(int layer, int expert) {
            long base = 1000L * expert;
            return ExpertLocation.contiguous(Path.of("fake"), base, new long[] {0, 17, 34, 51, 68, 85}, new long[] {17, 17, 17, 17, 17, 15});
        }
    }

    /** Fills the payload with the expert's id; the first read of expert 0 blocks until released. */
    static final class GatedReader implements ExpertReader {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final AtomicInteger reads = new AtomicInteger();

        @Override
        public long read(ExpertLocation loc, MemorySegment slot) throws IOException {
            reads.incrementAndGet();
            if (loc.offset() == 0) {
                entered.countDown();
                try {
                    release.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    throw new IOException(e);
                }
            }
            slot.asSlice(0, loc.length()).fill((byte) (loc.offset() / 1000 + 1));
            return 0;
        }
    }

    @Test
    void aSecondRequestForAnInflightExpertWaitsInsteadOfReadingTwice() throws Exception {
        GatedReader reader = new GatedReader();
        long budget = 4 * CacheGeometry.slotBytes(100);
        try (ExpertCache cache = new ExpertCache(new FakeLocator(), reader, ExpertCache.Settings.of(budget, 2), null)) {
            AtomicReference<Object> first = new AtomicReference<>(), second = new AtomicReference<>();
            Thread a = new Thread(() -> first.set(getOrError(cache)));
            a.start();
            assertTrue(reader.entered.await(10, TimeUnit.SECONDS));
            Thread b = new Thread(() -> second.set(getOrError(cache)));
            b.start();
            b.join(200);
            assertTrue(b.isAlive(), "the second get must wait for the read in flight");
            assertEquals(1, cache.getMany(0, 0, 1), "getMany skips the in-flight expert and reads the other");
            reader.release.countDown();
            a.join();
            b.join();
            for (Object r : List.of(first.get(), second.get())) {
                ResidentExpert e = (ResidentExpert) r;
                assertEquals(-1, e.bytes().mismatch(MemorySegment.ofArray(new byte[100]).fill((byte) 1)));
            }
            assertEquals(2, reader.reads.get(), "expert 0 once, expert 1 once");
            CacheStats s = cache.stepStats();
            assertEquals(2, s.requests());
            assertEquals(1, s.misses());
            assertEquals(1, s.hits());
            assertEquals(1, s.prefetchReads());
        }
    }

    private static Object getOrError(ExpertCache cache) {
        try {
            return cache.get(0, 0);
        } catch (ExpertLoadException e) {
            return e;
        }
    }

    @Test
    void resetStepResetsEveryCounterTogether() throws Exception {
        GatedReader reader = new GatedReader();
        reader.release.countDown();
        long budget = 4 * CacheGeometry.slotBytes(100);
        try (ExpertCache cache = new ExpertCache(new FakeLocator(), reader, ExpertCache.Settings.of(budget, 2), null)) {
            cache.getMany(0, 1, 2);
            cache.get(0, 1);
            cache.get(0, 2);
            assertEquals(2, cache.stepStats().prefetchReads());
            cache.resetStep();
            assertEquals(CacheStats.ZERO, cache.stepStats());
            cache.get(0, 1);
            CacheStats s = cache.stepStats();
            assertEquals(1, s.hits());
            assertEquals(0, s.prefetchReads());
            assertEquals(1.0, s.trueHitRate(), "pitfall 17: a hit on a prefetch from the previous step is a TRUE hit in this one");
            assertEquals(3, cache.totalStats().hits());
            String report = cache.report(false);
            assertTrue(report.startsWith("cache [final step]\n  policy       : window-LFU\n"), report);
            assertTrue(report.contains("  requests     : 1  hits 1 (100.00%)  misses 0  evictions 0\n"), report);
        }
    }
}
