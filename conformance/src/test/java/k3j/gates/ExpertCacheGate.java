package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import k3j.cache.CacheGeometry;
import k3j.cache.CachePolicy;
import k3j.cache.CacheSimulator;
import k3j.cache.CacheStats;
import k3j.cache.CacheTrace;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertForm;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertLocator;
import k3j.cache.ExpertPart;
import k3j.cache.ExpertReader;
import k3j.cache.FileExpertReader;
import k3j.cache.ReadMode;
import k3j.cache.ResidentExpert;
import k3j.cli.K3;
import k3j.harness.Evidence;
import k3j.harness.RecordingExpertReader;
import k3j.harness.SyntheticExpertShard;
import k3j.kernels.Mxfp4;
import k3j.model.KernelExperts;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The routed-expert cache serves exactly the bytes on disk (docs/semantics.md §10.4), or exactly their kernel-ready
 * form made once at slot fill (repacked MXFP4, nibble or int8 codes): serial, batched,
 * mixed and under eviction pressure, with window-LFU, S3-FIFO and LRU, through O_DIRECT and the page cache; a
 * failed read is counted and never served; two threads never read one expert twice at once; the
 * speculative read-ahead changes no byte; and a recorded trace replayed by sim-cache reproduces the
 * live hit count exactly.
 */
@Tag("cache")
@Epic("expert cache")
@DisplayName("expert cache: every served expert is byte-identical to a direct read, or to its repacked form")
class ExpertCacheGate {
    static final int LAYERS = 2;
    static final int EXPERTS = 24;
    static final int TOP_K = 4;
    /** MXFP4 geometry of the shard's experts: intermediate 42 (a padded row block), latent 130 (ragged groups). */
    static final int INTER = 42, LATENT = 130;
    static final long[] MX_PARTS = {INTER * LATENT / 2, INTER * 5, LATENT * INTER / 2, LATENT * 2, INTER * LATENT / 2, INTER * 5};
    static final ExpertForm[] FORMS = {ExpertForm.STORED, new KernelExperts(INTER, LATENT, Mxfp4.Codes.NIBBLES),
        new KernelExperts(INTER, LATENT, Mxfp4.Codes.INT8)};

    @TempDir
    static Path dir;
    static SyntheticExpertShard shard;
    /** reference[key][part]: each part read straight from the file, no cache. */
    static byte[][][] reference;

    @BeforeAll
    static void writeShard() throws IOException {
        shard = SyntheticExpertShard.write(dir.resolve("experts.bin"), LAYERS, EXPERTS, MX_PARTS);
        assertTrue(shard.expertBytes() % 4096 != 0, "the fixture's expert size must not be a multiple of 4096");
        assertTrue(Files.size(shard.file) % 4096 != 0, "the last expert must end off a 4096 boundary");
        reference = new byte[LAYERS * EXPERTS][ExpertPart.values().length][];
        for (int[] k : shard.allKeys()) {
            for (ExpertPart p : ExpertPart.values()) {
                byte[] got = shard.directRead(k[0], k[1], p);
                assertTrue(java.util.Arrays.equals(got, shard.expected(k[0], k[1], p)), "fixture self-check: L" + k[0] + " " + k[1] + " " + p);
                reference[k[0] * EXPERTS + k[1]][p.ordinal()] = got;
            }
        }
    }

    enum Workload { SERIAL, BATCH, MIXED, PRESSURE }

    record Case(String name, CachePolicy policy, ReadMode mode, Workload workload, int slots, ExpertForm form) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Stream<Case> cases() {
        List<Case> out = new ArrayList<>();
        for (ExpertForm f : FORMS) {
            for (CachePolicy p : CachePolicy.values()) {
                for (ReadMode m : ReadMode.values()) {
                    String tag = f + ", " + p.label() + " " + m.name().toLowerCase(Locale.ROOT);
                    out.add(new Case(tag + ": serial, 3 passes, 10 slots", p, m, Workload.SERIAL, 10, f));
                    out.add(new Case(tag + ": batches of 4 then get, 10 slots", p, m, Workload.BATCH, 10, f));
                    out.add(new Case(tag + ": mixed getMany/get, 10 slots", p, m, Workload.MIXED, 10, f));
                    for (int s = TOP_K + 1; s <= TOP_K + 3; s++) {
                        out.add(new Case(tag + ": pressure, " + s + " slots", p, m, Workload.PRESSURE, s, f));
                    }
                }
            }
        }
        return out.stream();
    }

    static ExpertCache.Settings settings(CachePolicy p, ReadMode m, int slots) {
        return settings(p, m, slots, ExpertForm.STORED);
    }

    static ExpertCache.Settings settings(CachePolicy p, ReadMode m, int slots, ExpertForm form) {
        long slot = CacheGeometry.slotBytes(Math.max(shard.expertBytes(), form.bytes(shard.location(0, 0))));
        return new ExpertCache.Settings(slots * slot, TOP_K, p, m, true, 3, false);
    }

    /** The kernel-ready form of (layer, expert) made from the direct read, without the cache. */
    static final Map<String, MemorySegment> FORMED = new ConcurrentHashMap<>();

    static MemorySegment formed(ExpertForm form, int layer, int expert) {
        return FORMED.computeIfAbsent(form + " " + layer + " " + expert, k -> {
            ExpertLocation loc = shard.location(layer, expert);
            byte[] stored = new byte[(int) loc.length()];
            for (ExpertPart p : ExpertPart.values()) {
                byte[] b = reference[layer * EXPERTS + expert][p.ordinal()];
                System.arraycopy(b, 0, stored, (int) loc.partOffset(p), b.length);
            }
            MemorySegment dst = MemorySegment.ofArray(new byte[(int) form.bytes(loc)]);
            form.fill(loc, MemorySegment.ofArray(stored), dst);
            return dst;
        });
    }

    /**
     * Checks every part of a served expert against the direct read (or the whole expert against the kernel form of
     * the direct read); returns the number of wrong parts.
     */
    static int wrongParts(ResidentExpert r, int layer, int expert) {
        int wrong = 0;
        if (r.layer() != layer || r.expert() != expert) wrong++;
        if (r.form() != ExpertForm.STORED) return wrong + (r.bytes().mismatch(formed(r.form(), layer, expert)) == -1 ? 0 : 1);
        // O_DIRECT reads the 4096-aligned window around the run into a 4096-aligned slot: the payload
        // lands at the same offset modulo 4096 as in the file (pad = off − lo); buffered reads land at 0
        long inPage = r.bytes().address() % 4096;
        if (r.location().contiguous() && inPage != 0 && inPage != r.location().offset() % 4096) wrong++;
        for (ExpertPart p : ExpertPart.values()) {
            MemorySegment want = MemorySegment.ofArray(reference[layer * EXPERTS + expert][p.ordinal()]);
            if (r.part(p).mismatch(want) != -1) wrong++;
        }
        return wrong;
    }

    /** A token-like request stream: per layer, TOP_K distinct experts drawn with a skew. */
    static int[] topK(Random rnd) {
        int[] ids = new int[TOP_K];
        for (int i = 0; i < TOP_K; i++) {
            int e;
            do {
                e = rnd.nextDouble() < 0.6 ? rnd.nextInt(6) : rnd.nextInt(EXPERTS);
            } while (contains(ids, i, e));
            ids[i] = e;
        }
        return ids;
    }

    private static boolean contains(int[] a, int n, int v) {
        for (int i = 0; i < n; i++) if (a[i] == v) return true;
        return false;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    @DisplayName("served bytes equal direct reads; counters add up")
    void servedBytesEqualDirectReads(Case c) throws Exception {
        RecordingExpertReader reader = new RecordingExpertReader(new FileExpertReader(c.mode(), n -> {}), shard, 0);
        int wrong = 0, gets = 0;
        try (ExpertCache cache = new ExpertCache(shard, reader, settings(c.policy(), c.mode(), c.slots(), c.form()), c.form(), null)) {
            assertEquals(c.slots(), cache.geometry().slots());
            Random rnd = new Random(c.name().hashCode());
            switch (c.workload()) {
                case SERIAL -> {
                    for (int pass = 0; pass < 3; pass++) {
                        for (int[] k : shard.allKeys()) {
                            wrong += wrongParts(cache.get(k[0], k[1]), k[0], k[1]);
                            gets++;
                        }
                        if (pass == 0) assertEquals(LAYERS * EXPERTS, cache.stepStats().misses(), "a cold pass misses every expert once");
                    }
                }
                case BATCH, PRESSURE -> {
                    for (int token = 0; token < 40; token++) {
                        for (int layer = 0; layer < LAYERS; layer++) {
                            int[] ids = topK(rnd);
                            boolean serialOnly = c.workload() == Workload.PRESSURE && token % 3 == 2;
                            if (!serialOnly) cache.getMany(layer, ids);
                            List<ResidentExpert> held = new ArrayList<>();
                            for (int e : ids) {
                                ResidentExpert r = cache.get(layer, e);
                                wrong += wrongParts(r, layer, e);
                                held.add(r);
                                gets++;
                            }
                            // the protection ring: none of this token's experts was evicted while the batch was served
                            for (int i = 0; i < ids.length; i++) wrong += wrongParts(held.get(i), layer, ids[i]);
                        }
                    }
                }
                case MIXED -> {
                    for (int step = 0; step < 300; step++) {
                        int layer = rnd.nextInt(LAYERS);
                        if (rnd.nextInt(3) == 0) {
                            int n = 1 + rnd.nextInt(6);
                            int[] ids = new int[n];
                            for (int i = 0; i < n; i++) ids[i] = rnd.nextInt(EXPERTS + 2) - 1; // −1 and 24 are out of range
                            cache.getMany(layer, ids);
                            for (int e : ids) {
                                if (e >= 0 && e < EXPERTS && rnd.nextBoolean()) {
                                    wrong += wrongParts(cache.get(layer, e), layer, e);
                                    gets++;
                                }
                            }
                        } else {
                            int e = rnd.nextInt(EXPERTS);
                            wrong += wrongParts(cache.get(layer, e), layer, e);
                            gets++;
                        }
                    }
                }
            }
            CacheStats s = cache.stepStats();
            long loads = s.misses() + s.prefetchReads();
            Evidence.parameter("hits", s.hits());
            Evidence.parameter("misses", s.misses());
            Evidence.parameter("evictions", s.evictions());
            Evidence.parameter("prefetch reads", s.prefetchReads());
            Evidence.parameter("hit rate", s.hitRate());
            Evidence.parameter("TRUE hit rate", s.trueHitRate());
            Evidence.text("report", cache.report(false));

            assertEquals(0, wrong, "parts served with bytes different from a direct read");
            assertEquals(gets, s.requests(), "every get is one request");
            assertEquals(s.requests(), s.hits() + s.misses(), "hits + misses = requests");
            assertEquals(0, s.failedReads());
            assertEquals(loads, reader.totalReads(), "every miss and every prefetch is exactly one read");
            assertEquals(loads * shard.expertBytes(), s.bytesRead(), "bytes read = loads x expert size");
            assertEquals(Math.max(0, loads - c.slots()), s.evictions(), "every load after the cold fill evicts exactly one expert");
            assertEquals(Math.min(c.slots(), loads), cache.residentCount());
            if (c.workload() == Workload.SERIAL) assertEquals(0, s.prefetchReads());
            if (c.workload() == Workload.BATCH || c.workload() == Workload.PRESSURE) {
                assertTrue(s.prefetchReads() > 0, "the batch prefetch read something");
                assertTrue(s.prefetchReads() - s.prefetchWasted() <= s.hits(),
                        "prefetch_reads - wasted <= hits (each prefetched expert that was used was a hit)");
            }
            if (c.workload() == Workload.BATCH) {
                assertEquals(0, s.prefetchWasted(), "with room beyond the protection ring no prefetch is wasted");
                assertTrue(s.prefetchReads() <= s.hits(), "prefetch_reads <= hits");
                assertEquals(0, s.misses(), "with room for the whole batch, get() never misses after getMany");
            }
            if (c.workload() == Workload.PRESSURE) assertTrue(s.evictions() > 0, "pressure evicts");
            FileExpertReader file = (FileExpertReader) reader.real();
            if (c.mode() == ReadMode.DIRECT) {
                assertEquals(reader.contiguousReads(), file.directReads(), "every contiguous expert went through O_DIRECT");
                assertTrue(file.directReads() > 0, "no O_DIRECT read happened: the filesystem of " + dir
                        + " refused it (set java.io.tmpdir to one that accepts it: ext4, xfs, tmpfs on Linux >= 6.6)");
            } else {
                assertEquals(0, file.directReads(), "buffered mode never opens O_DIRECT");
            }
        }
    }

    @Test
    @DisplayName("a budget below top-k + 1 slots is refused; exactly top-k + 1 is accepted")
    void refusesACacheSmallerThanOneTokensWorkingSet() throws Exception {
        long slot = CacheGeometry.slotBytes(shard.expertBytes());
        assertEquals(0, slot % 4096, "slot stride is 4096-aligned (pitfall 18)");
        assertTrue(slot >= shard.expertBytes() + 2 * 4096, "a slot has room for the O_DIRECT widening on both sides");
        for (long budget : new long[] {0, TOP_K * slot, (TOP_K + 1) * slot - 1}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new ExpertCache(shard,
                    new FileExpertReader(ReadMode.BUFFERED, n -> {}), ExpertCache.Settings.of(budget, TOP_K), null));
            assertTrue(e.getMessage().contains("A cache smaller than one token's working set would evict an expert that is still being multiplied"),
                    e.getMessage());
        }
        try (ExpertCache ok = new ExpertCache(shard, new FileExpertReader(ReadMode.BUFFERED, n -> {}),
                ExpertCache.Settings.of((TOP_K + 1) * slot, TOP_K), null)) {
            assertEquals(TOP_K + 1, ok.geometry().slots());
            assertEquals(TOP_K, ok.geometry().protectedSlots());
            Evidence.text("banner", ok.geometry().banner());
        }
    }

    @Test
    @DisplayName("a file truncated under the open cache: the failed read is counted, never served, and retried")
    void truncatedFileFailsLoudlyAndRetries() throws Exception {
        for (CachePolicy p : CachePolicy.values()) {
            for (ReadMode m : ReadMode.values()) {
                String what = p.label() + " " + m;
                Path f = dir.resolve("truncated-" + p + "-" + m + ".bin");
                SyntheticExpertShard victimShard = SyntheticExpertShard.write(f, LAYERS, EXPERTS, MX_PARTS);
                int lost = 10; // layer 1 expert 10: contiguous, the run is cut in its middle
                assertFalse(SyntheticExpertShard.gapped(1, lost));
                CacheTrace trace = new CacheTrace(LAYERS, EXPERTS);
                try (ExpertCache cache = new ExpertCache(victimShard, new FileExpertReader(m, n -> {}), settings(p, m, 6), trace)) {
                    assertEquals(0, wrongParts(cache.get(0, 0), 0, 0), what); // opens the file
                    try (FileChannel ch = FileChannel.open(f, StandardOpenOption.WRITE)) {
                        ch.truncate(victimShard.location(1, lost).offset() + 5000);
                    }
                    ExpertLoadException e = assertThrows(ExpertLoadException.class, () -> cache.get(1, lost), what);
                    assertTrue(e.getMessage().contains("L1 expert " + lost), e.getMessage());
                    CacheStats s = cache.stepStats();
                    assertEquals(1, s.failedReads(), what);
                    assertEquals(2, s.misses(), what);
                    assertEquals(shard.expertBytes(), s.bytesRead(), what + ": a failed read adds no bytes");
                    assertEquals(1, cache.residentCount(), what + ": the failed slot went back to EMPTY");
                    assertEquals(0, wrongParts(cache.get(0, 0), 0, 0), what + ": the resident expert is untouched");
                    // the batch path: the lost expert and one past the cut fail, one before it lands
                    assertEquals(1, cache.getMany(1, lost, 3, lost + 1), what);
                    assertEquals(3, cache.stepStats().failedReads(), what);
                    assertEquals(2, cache.residentCount(), what);
                    assertThrows(ExpertLoadException.class, () -> cache.get(1, lost), what + ": still failing, still not served");
                    // restore the bytes under the same open channel: the next request retries and succeeds
                    SyntheticExpertShard.write(f, LAYERS, EXPERTS, MX_PARTS);
                    assertEquals(0, wrongParts(cache.get(1, lost), 1, lost), what + ": retried after the failure");
                    assertEquals(0, wrongParts(cache.get(1, lost + 1), 1, lost + 1), what);
                    assertEquals(4, cache.stepStats().failedReads(), what);
                    // pitfall 17: the trace holds every get() the model made, the failed ones too, and no batch load
                    assertEquals(6, trace.requests(), what);
                    assertEquals(cache.stepStats().requests(), trace.requests(), what);
                    Evidence.text("report " + what, cache.report(false));
                }
            }
        }
    }

    @Test
    @DisplayName("an injected partial read is counted and never served, serial and batch, and the retry reads clean bytes")
    void injectedPartialReadIsNeverServed() throws Exception {
        for (CachePolicy p : CachePolicy.values()) {
            RecordingExpertReader reader = new RecordingExpertReader(new FileExpertReader(ReadMode.DIRECT, n -> {}), shard, 0);
            int bad = 1 * EXPERTS + 5, badBatch = 7;
            reader.inject((key, attempt) -> (key == bad || key == badBatch) && attempt == 1);
            try (ExpertCache cache = new ExpertCache(shard, reader, settings(p, ReadMode.DIRECT, 8), null)) {
                assertThrows(ExpertLoadException.class, () -> cache.get(1, 5), p.label());
                assertEquals(0, cache.residentCount(), p.label());
                assertEquals(0, wrongParts(cache.get(1, 5), 1, 5), p.label() + ": second attempt, garbage overwritten");
                assertEquals(3, cache.getMany(0, 6, 7, 8, 9), p.label() + ": one of four prefetches failed");
                CacheStats s = cache.stepStats();
                assertEquals(2, s.failedReads(), p.label());
                assertEquals(3, s.prefetchReads(), p.label());
                for (int e = 6; e <= 9; e++) assertEquals(0, wrongParts(cache.get(0, e), 0, e), p.label() + " expert " + e);
                assertEquals(2, reader.reads(badBatch), p.label() + ": get() read the failed prefetch again");
                s = cache.stepStats();
                assertEquals(3, s.hits(), p.label());
                assertEquals(3, s.misses(), p.label() + ": 1 failed + 1 retried + 1 failed prefetch read again");
            }
        }
    }

    @Test
    @DisplayName("getMany on one thread, get on another, overlapping keys: never two reads of one expert, never wrong bytes")
    void concurrentBatchAndSerialNeverReadTwice() throws Exception {
        for (CachePolicy p : CachePolicy.values()) {
            for (int slots : new int[] {LAYERS * EXPERTS, 8}) {
                for (int round = 0; round < 3; round++) {
                    RecordingExpertReader reader = new RecordingExpertReader(new FileExpertReader(ReadMode.DIRECT, n -> {}), shard, 2);
                    Random rnd = new Random(round * 31 + slots);
                    List<int[]> tokens = new ArrayList<>();
                    for (int t = 0; t < 24; t++) tokens.add(topK(rnd));
                    AtomicInteger wrong = new AtomicInteger();
                    AtomicReference<Throwable> error = new AtomicReference<>();
                    CountDownLatch go = new CountDownLatch(1);
                    try (ExpertCache cache = new ExpertCache(shard, reader, settings(p, ReadMode.DIRECT, slots), null)) {
                        Thread batch = new Thread(() -> {
                            try {
                                go.await();
                                for (int t = 0; t < tokens.size(); t++) cache.getMany(t % LAYERS, tokens.get(t));
                            } catch (Throwable e) {
                                error.compareAndSet(null, e);
                            }
                        });
                        Thread serial = new Thread(() -> {
                            try {
                                go.await();
                                for (int t = 0; t < tokens.size(); t++) {
                                    for (int e : tokens.get(t)) wrong.addAndGet(wrongParts(cache.get(t % LAYERS, e), t % LAYERS, e));
                                }
                            } catch (Throwable e) {
                                error.compareAndSet(null, e);
                            }
                        });
                        batch.start();
                        serial.start();
                        go.countDown();
                        batch.join();
                        serial.join();
                        if (error.get() != null) throw new AssertionError("a thread failed", error.get());
                        CacheStats s = cache.stepStats();
                        String what = p.label() + ", " + slots + " slots, round " + round;
                        assertEquals(0, wrong.get(), what + ": wrong bytes served");
                        assertEquals(1, reader.maxInFlightPerKey(), what + ": one expert was read twice at the same time");
                        assertEquals(tokens.size() * TOP_K, s.requests(), what);
                        assertEquals(s.requests(), s.hits() + s.misses(), what);
                        assertEquals(s.misses() + s.prefetchReads(), reader.totalReads(), what);
                        if (slots == LAYERS * EXPERTS) {
                            for (int k = 0; k < LAYERS * EXPERTS; k++) {
                                assertTrue(reader.reads(k) <= 1, what + ": key " + k + " read " + reader.reads(k) + " times with room for all");
                            }
                            assertEquals(0, s.evictions(), what);
                        }
                        if (round == 0) {
                            Evidence.parameter("hits " + p.label() + " " + slots, s.hits());
                            Evidence.parameter("prefetch reads " + p.label() + " " + slots, s.prefetchReads());
                        }
                    }
                }
            }
        }
    }

    @Test
    @DisplayName("where the filesystem refuses O_DIRECT, reads fall back to buffered, noted once, same bytes")
    void directFallsBackWhereRefused() throws Exception {
        // tmpfs refused O_DIRECT with EINVAL before Linux 6.6 and this machine's tmpfs accepts it, so
        // the refusal is played by the opener: it throws what open(2) raised there
        List<String> notes = new ArrayList<>();
        FileExpertReader reader = new FileExpertReader(ReadMode.DIRECT, notes::add,
                file -> { throw new java.nio.file.FileSystemException(file.toString(), null, "Invalid argument"); });
        try (ExpertCache cache = new ExpertCache(shard, reader, settings(CachePolicy.S3_FIFO, ReadMode.DIRECT, 10), null)) {
            int wrong = 0;
            for (int pass = 0; pass < 2; pass++) {
                for (int[] k : shard.allKeys()) wrong += wrongParts(cache.get(k[0], k[1]), k[0], k[1]);
            }
            assertEquals(0, wrong);
            assertTrue(reader.directRefused(shard.file));
            assertEquals(0, reader.directReads());
            assertEquals(2 * LAYERS * EXPERTS, reader.bufferedReads());
            assertEquals(1, notes.size(), "the fallback is noted once: " + notes);
            assertTrue(notes.get(0).contains("O_DIRECT refused"), notes.get(0));
            Evidence.text("note", notes.get(0));
        }
    }

    @Test
    @DisplayName("speculation on: speculate, getMany, get over overlapping sets plus churn, every byte checked, spec_used > 0")
    void speculativeReadAheadServesTheSameBytes() throws Exception {
        for (CachePolicy p : CachePolicy.values()) {
            RecordingExpertReader reader = new RecordingExpertReader(new FileExpertReader(ReadMode.DIRECT, n -> {}), shard, 1);
            int slots = 2 * TOP_K + 8;
            try (ExpertCache cache = new ExpertCache(shard, reader, settings(p, ReadMode.DIRECT, slots).withSpeculation(true), null)) {
                assertTrue(cache.speculationOn(), "speculation needs 2·topK + 8 = " + slots + " slots");
                Random rnd = new Random(99);
                int[][] base = {{0, 1, 2, 3}, {4, 5, 6, 7}};
                int wrong = 0, gets = 0;
                for (int token = 0; token < 24; token++) {
                    for (int layer = 0; layer < LAYERS; layer++) {
                        cache.speculate(layer);
                        int[] ids = base[layer].clone();
                        ids[rnd.nextInt(TOP_K)] = 8 + rnd.nextInt(EXPERTS - 8); // overlapping sets: three of four repeat
                        cache.getMany(layer, ids);
                        for (int e : ids) {
                            wrong += wrongParts(cache.get(layer, e), layer, e);
                            gets++;
                        }
                        for (int churn = 0; churn < 12; churn++) {
                            int l = rnd.nextInt(LAYERS), e = rnd.nextInt(EXPERTS);
                            wrong += wrongParts(cache.get(l, e), l, e);
                            gets++;
                        }
                    }
                }
                cache.awaitSpeculation();
                CacheStats s = cache.stepStats();
                String what = p.label();
                Evidence.parameter("spec reads " + what, s.specReads());
                Evidence.parameter("spec used " + what, s.specUsed());
                Evidence.parameter("hits " + what, s.hits());
                Evidence.text("report " + what, cache.report(false));
                assertEquals(0, wrong, what + ": wrong bytes served");
                assertEquals(gets, s.requests(), what);
                assertEquals(s.requests(), s.hits() + s.misses(), what);
                assertEquals(0, s.failedReads(), what);
                assertTrue(s.specUsed() > 0, what + ": spec_used > 0");
                assertTrue(s.specReads() > 0, what + ": the read-ahead read something");
                assertEquals(s.misses() + s.prefetchReads() + s.specReads(), reader.totalReads(), what + ": every load is one read");
                assertEquals(1, reader.maxInFlightPerKey(), what + ": the read-ahead and the forward never read one expert at once");
            }
        }
    }

    /** One recorded run: per token and layer, the top-k through getMany (if on) then get. */
    static CacheStats recordRun(CachePolicy p, int slots, boolean prefetch, Path traceDir) throws Exception {
        CacheTrace trace = new CacheTrace(LAYERS, EXPERTS);
        ExpertCache.Settings s = settings(p, ReadMode.BUFFERED, slots).withPrefetch(prefetch);
        Random rnd = new Random(1234 + slots);
        try (ExpertCache cache = new ExpertCache(shard, new FileExpertReader(ReadMode.BUFFERED, n -> {}), s, trace)) {
            int wrong = 0;
            for (int token = 0; token < 60; token++) {
                for (int layer = 0; layer < LAYERS; layer++) {
                    int[] ids = topK(rnd);
                    cache.getMany(layer, ids);
                    for (int e : ids) wrong += wrongParts(cache.get(layer, e), layer, e);
                }
            }
            assertEquals(0, wrong);
            trace.write(traceDir);
            return cache.stepStats();
        }
    }

    @Test
    @DisplayName("a recorded trace replayed by sim-cache at the live slot count gives the live hit count")
    void traceReplayReproducesLiveHits() throws Exception {
        ObjectMapper json = new ObjectMapper();
        Map<String, Object> table = new LinkedHashMap<>();
        for (CachePolicy p : CachePolicy.values()) {
            for (int slots : new int[] {TOP_K + 1, 7, 11, 19}) {
                Path traceDir = dir.resolve("trace-" + p + "-" + slots);
                CacheStats live = recordRun(p, slots, false, traceDir);
                int[] pairs = CacheTrace.readPairs(traceDir);
                assertEquals(live.requests() * 8, Files.size(traceDir.resolve(CacheTrace.TRACE_FILE)));
                assertEquals(live.requests(), pairs.length / 2);
                JsonNode hist = json.readTree(traceDir.resolve(CacheTrace.HIST_FILE).toFile());
                assertEquals(LAYERS, hist.get("n_layers").asInt());
                assertEquals(EXPERTS, hist.get("n_experts").asInt());
                long sum = 0;
                for (Iterator<JsonNode> it = hist.get("counts").elements(); it.hasNext(); ) sum += it.next().asLong();
                assertEquals(live.requests(), sum, "the histogram counts every request");

                CacheSimulator sim = new CacheSimulator(pairs);
                long replayed = sim.engine(p, slots, TOP_K, false).hits();
                String what = p.label() + " at " + slots + " slots";
                assertEquals(live.hits(), replayed, what + ": sim-cache hits vs live hits (prefetch off)");
                assertTrue(sim.belady(slots) >= replayed, what + ": Belady is an upper bound");
                String out = simCache(traceDir, slots, false);
                assertEquals(pct(live.hits(), live.requests()), column(out, slots, p), what + ": the printed column");

                // with the batch prefetch on: the replay rebuilds the batches from the layer runs of the trace
                Path batchedDir = dir.resolve("trace-batched-" + p + "-" + slots);
                CacheStats batched = recordRun(p, slots, true, batchedDir);
                CacheSimulator.Replay replay = new CacheSimulator(CacheTrace.readPairs(batchedDir)).engine(p, slots, TOP_K, true);
                assertEquals(batched.hits(), replay.hits(), what + ": batched hits");
                assertEquals(batched.prefetchReads(), replay.prefetchReads(), what + ": batched prefetch reads");
                assertEquals(batched.trueHits(), replay.trueHits(), what + ": batched TRUE hits");
                String outBatched = simCache(batchedDir, slots, true);
                assertEquals(pct(batched.trueHits(), batched.requests()), column(outBatched, slots, p), what + ": the printed TRUE column");

                Map<String, Object> r = new LinkedHashMap<>();
                r.put("requests", live.requests());
                r.put("serial: live hits", live.hits());
                r.put("serial: sim hits", replayed);
                r.put("batched: live TRUE hits", batched.trueHits());
                r.put("batched: sim TRUE hits", replay.trueHits());
                r.put("batched: live prefetch reads", batched.prefetchReads());
                r.put("Belady hits", sim.belady(slots));
                table.put(what, r);
                if (p == CachePolicy.S3_FIFO && slots == 7) {
                    Evidence.text("sim-cache output", out);
                    Evidence.text("sim-cache --batched output", outBatched);
                }
            }
        }
        Evidence.json("live vs replay", table);
    }

    static String simCache(Path traceDir, int slots, boolean batched) {
        StringWriter out = new StringWriter();
        var cl = K3.commandLine();
        cl.setOut(new PrintWriter(out));
        List<String> args = new ArrayList<>(List.of("sim-cache", traceDir.toString(), "--slots", Integer.toString(slots),
                "--top-k", Integer.toString(TOP_K), "--expert-bytes", Long.toString(shard.expertBytes()),
                "--requests-per-token", Integer.toString(LAYERS * TOP_K)));
        if (batched) args.add("--batched");
        assertEquals(0, cl.execute(args.toArray(String[]::new)), out.toString());
        return out.toString();
    }

    static String pct(long hits, long requests) {
        return String.format(Locale.ROOT, "%.2f%%", 100.0 * hits / requests);
    }

    /** The LRU, S3-FIFO or WINDOW-LFU cell of the row for {@code slots} in a sim-cache table. */
    static String column(String table, int slots, CachePolicy p) {
        String row = table.lines().filter(l -> l.startsWith(slots + " slots")).findFirst()
                .orElseThrow(() -> new AssertionError("no row for " + slots + " slots in\n" + table));
        return row.trim().split("\\s+")[switch (p) {
            case LRU -> 3;
            case S3_FIFO -> 4;
            case WINDOW_LFU -> 5;
        }];
    }

    @Test
    @DisplayName("bad sim-cache usage exits 2 with one line and a pointer to --help")
    void simCacheUsage() {
        for (String[] args : new String[][] {{"sim-cache"}, {"sim-cache", dir.resolve("no-such-trace").toString()},
                {"sim-cache", dir.toString(), "--slots", "5", "--capacities", "8"}, {"sim-cache", dir.toString(), "--top-k", "0"}}) {
            StringWriter err = new StringWriter();
            var cl = K3.commandLine();
            cl.setErr(new PrintWriter(err));
            assertEquals(2, cl.execute(args), String.join(" ", args));
            assertTrue(err.toString().startsWith("k3: "), err.toString());
            assertTrue(err.toString().contains("'k3 sim-cache --help'") && !err.toString().contains("Usage:"), err.toString());
        }
    }


}
