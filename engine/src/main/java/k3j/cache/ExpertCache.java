package k3j.cache;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import k3j.io.DirectIo;

/**
 * The routed-expert cache (docs/semantics.md §6): a fixed arena of 4096-aligned slots, one lock over the
 * {@link SlotTable}, reads outside the lock. A slot being read into is INFLIGHT: it is never
 * handed out, served or evicted, and a second request for the same expert waits for the first
 * read instead of reading twice. A slot is published only after a FULL read; a failed or short
 * read is counted, the slot goes back to EMPTY and the caller gets an {@link ExpertLoadException}.
 * A slot holds its expert in the cache's {@link ExpertForm}, made once when the slot is filled: a hit hands out
 * the slot's bytes as they are.
 */
public final class ExpertCache implements ExpertSource, AutoCloseable {

    /**
     * @param budgetBytes  arena budget; nslot = floor(budget / slot) must be ≥ topK + 1
     * @param topK         experts per token per layer (sets the refusal floor and the protection ring)
     * @param policy       window-LFU (default), S3-FIFO or LRU
     * @param readMode     O_DIRECT (default) or buffered
     * @param prefetch     whether getMany reads (off = K3_NOPREFETCH)
     * @param readThreads  size of the fixed read pool used by getMany
     * @param speculate    whether {@link #speculate} reads ahead (off = K3_NOSPEC; also off below 2·topK + 8 slots)
     */
    public record Settings(long budgetBytes, int topK, CachePolicy policy, ReadMode readMode, boolean prefetch, int readThreads,
                           boolean speculate) {
        public Settings {
            if (readThreads < 1) throw new IllegalArgumentException("read threads must be at least 1, got " + readThreads);
            if (policy == null || readMode == null) throw new IllegalArgumentException("policy and read mode are required");
        }

        public static Settings of(long budgetBytes, int topK) {
            return new Settings(budgetBytes, topK, CachePolicy.WINDOW_LFU, ReadMode.DIRECT, true, 4, true);
        }

        /** The defaults as docs/semantics.md §7.10 lets the environment change them: K3_CACHE_POLICY=lru|s3-fifo, K3_NOPREFETCH. */
        public static Settings fromEnvironment(long budgetBytes, int topK, Map<String, String> env) {
            Settings s = of(budgetBytes, topK);
            String policy = env.getOrDefault("K3_CACHE_POLICY", "");
            if (!policy.isBlank()) s = s.withPolicy(CachePolicy.parse(policy));
            if (env.containsKey("K3_NOPREFETCH")) s = s.withPrefetch(false);
            if (env.containsKey("K3_NOSPEC")) s = s.withSpeculation(false);
            return s;
        }

        public Settings withPolicy(CachePolicy p) {
            return new Settings(budgetBytes, topK, p, readMode, prefetch, readThreads, speculate);
        }

        public Settings withReadMode(ReadMode m) {
            return new Settings(budgetBytes, topK, policy, m, prefetch, readThreads, speculate);
        }

        public Settings withPrefetch(boolean on) {
            return new Settings(budgetBytes, topK, policy, readMode, on, readThreads, speculate);
        }

        public Settings withSpeculation(boolean on) {
            return new Settings(budgetBytes, topK, policy, readMode, prefetch, readThreads, on);
        }
    }

    /** Counters of one window, mutated under the lock. */
    private static final class Counters {
        long requests, hits, misses, evictions, prefetchReads, prefetchWasted, specReads, specUsed, failedReads, bytesRead, readNanos;

        CacheStats snapshot() {
            return new CacheStats(requests, hits, misses, evictions, prefetchReads, prefetchWasted, specReads, specUsed, failedReads, bytesRead, readNanos);
        }
    }

    private final ExpertLocator locator;
    private final ExpertReader reader;
    private final boolean ownsReader;
    private final Settings settings;
    private final CacheGeometry geometry;
    private final CacheTrace trace;
    private final Arena arena;
    private final MemorySegment slots;
    private final SlotTable table;
    private final ExpertForm form;
    private final long[] padOf;
    private final long[] lengthOf;
    private final ExpertLocation[] locationOf;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition landed = lock.newCondition();
    private final ExecutorService pool;
    private final ExecutorService specWorker;
    private final AtomicBoolean specBusy = new AtomicBoolean();
    private final int[][] lastRouting;
    private Counters step = new Counters();
    private CacheStats finished = CacheStats.ZERO;

    /**
     * A cache reading through {@code reader}. The probe expert (expert 0 of {@code
     * locator.probeLayer()}) sizes the slots; {@code trace} (nullable) records every get().
     *
     * @throws IllegalArgumentException if the budget holds fewer than topK + 1 slots (§6.1)
     * @throws ExpertLoadException      if the probe expert cannot be resolved
     */
    public ExpertCache(ExpertLocator locator, ExpertReader reader, Settings settings, CacheTrace trace) throws ExpertLoadException {
        this(locator, reader, false, settings, ExpertForm.STORED, trace);
    }

    /** As {@link #ExpertCache(ExpertLocator, ExpertReader, Settings, CacheTrace)}, every slot holding its expert in {@code form}. */
    public ExpertCache(ExpertLocator locator, ExpertReader reader, Settings settings, ExpertForm form, CacheTrace trace) throws ExpertLoadException {
        this(locator, reader, false, settings, form, trace);
    }

    private ExpertCache(ExpertLocator locator, ExpertReader reader, boolean ownsReader, Settings settings, ExpertForm form, CacheTrace trace)
            throws ExpertLoadException {
        this.locator = locator;
        this.form = form;
        this.reader = reader;
        this.ownsReader = ownsReader;
        this.settings = settings;
        this.trace = trace;
        ExpertLocation probeLoc = locator.locate(locator.probeLayer(), 0);
        long probe = Math.max(probeLoc.length(), form.bytes(probeLoc));
        int keys = Math.multiplyExact(locator.layers(), locator.experts());
        this.geometry = CacheGeometry.plan(probe, settings.budgetBytes(), settings.topK(), keys);
        this.table = new SlotTable(geometry.slots(), keys, geometry.protectedSlots(), settings.policy());
        this.padOf = new long[geometry.slots()];
        this.lengthOf = new long[geometry.slots()];
        this.locationOf = new ExpertLocation[geometry.slots()];
        this.arena = Arena.ofShared();
        this.slots = DirectIo.allocate(arena, geometry.arenaBytes());
        AtomicInteger n = new AtomicInteger();
        this.pool = Executors.newFixedThreadPool(settings.readThreads(), r -> {
            Thread t = new Thread(r, "k3-expert-read-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        this.lastRouting = new int[locator.layers()][];
        this.specWorker = speculationOn() ? Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "k3-expert-speculate");
            t.setDaemon(true);
            return t;
        }) : null;
    }

    /** Speculation needs two tokens' working set: off below 2·topK + 8 slots (§6.6). */
    public boolean speculationOn() {
        return settings.speculate() && settings.prefetch() && geometry.slots() >= 2 * settings.topK() + 8;
    }

    /** A cache over real files: positional FileChannel reads, O_DIRECT per {@code settings.readMode()}. */
    public static ExpertCache open(ExpertLocator locator, Settings settings, CacheTrace trace, Consumer<String> notes)
            throws ExpertLoadException {
        return new ExpertCache(locator, new FileExpertReader(settings.readMode(), notes), true, settings, ExpertForm.STORED, trace);
    }

    public CacheGeometry geometry() {
        return geometry;
    }

    public Settings settings() {
        return settings;
    }

    public ExpertReader reader() {
        return reader;
    }

    /** The form every slot holds its expert in. */
    public ExpertForm form() {
        return form;
    }

    /** The key of (layer, expert): layer · experts + expert (§6.1). */
    public int key(int layer, int expert) {
        if (layer < 0 || layer >= locator.layers() || expert < 0 || expert >= locator.experts()) {
            throw new IllegalArgumentException("no expert L" + layer + " " + expert + " in a cache of "
                    + locator.layers() + " layers x " + locator.experts() + " experts");
        }
        return layer * locator.experts() + expert;
    }

    @Override
    public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
        int key = key(layer, expert);
        if (trace != null) trace.record(layer, expert); // before serving (pitfall 17)
        ExpertLocation loc = null;
        SlotTable.Reservation r;
        lock.lock();
        try {
            step.requests++;
            while (true) {
                int s = table.residentSlot(key);
                if (s >= 0) {
                    step.hits++;
                    table.serve(s);
                    return view(s, layer, expert);
                }
                if (table.inflight(key)) {
                    landed.awaitUninterruptibly();
                    continue;
                }
                if (loc == null) {
                    try {
                        loc = resolve(layer, expert);
                    } catch (ExpertLoadException e) {
                        step.misses++;
                        step.failedReads++;
                        throw e;
                    }
                }
                r = table.reserve(key);
                if (r != null) break;
                if (table.inflightCount() == 0) {
                    step.misses++;
                    step.failedReads++;
                    throw new ExpertLoadException(layer, expert, "every slot is pinned or in use (" + geometry.slots() + " slots)");
                }
                landed.awaitUninterruptibly();
            }
            step.misses++;
            count(r);
        } finally {
            lock.unlock();
        }

        long t0 = System.nanoTime();
        long pad = -1;
        Throwable failure = null;
        try {
            pad = fill(loc, r.slot());
        } catch (Throwable e) { // even an Error must free the INFLIGHT slot, or its waiters hang
            failure = e;
        }
        long dt = System.nanoTime() - t0;

        lock.lock();
        try {
            step.readNanos += dt;
            if (failure != null) {
                table.abandon(r.slot(), key);
                step.failedReads++;
                if (failure instanceof Error err) throw err;
                throw new ExpertLoadException(layer, expert, "load failed, leaving the slot empty: " + failure.getMessage(), failure);
            }
            padOf[r.slot()] = pad;
            lengthOf[r.slot()] = form.bytes(loc);
            locationOf[r.slot()] = loc;
            table.publish(r.slot(), key, false);
            table.handOut(r.slot());
            step.bytesRead += loc.length();
            return view(r.slot(), layer, expert);
        } finally {
            landed.signalAll();
            lock.unlock();
        }
    }

    @Override
    public int getMany(int layer, int... experts) {
        if (!settings.prefetch()) return 0;
        if (layer < 0 || layer >= locator.layers()) return 0;
        lock.lock();
        try { // this layer's routing, for speculation; spec_used counts the last one's ids asked again
            int[] previous = lastRouting[layer];
            if (previous != null) {
                for (int e : experts) {
                    for (int p : previous) {
                        if (p == e) {
                            step.specUsed++;
                            break;
                        }
                    }
                }
            }
            lastRouting[layer] = experts.clone();
        } finally {
            lock.unlock();
        }
        return loadBatch(layer, experts, false);
    }

    /**
     * The speculation hook (docs/semantics.md §6.6): the MoE calls it on entering {@code layer}, before
     * routing. It clears the protection ring (the previous layer's experts are no longer being
     * multiplied) and, if the read-ahead worker is idle, batch-loads the layer's last routing in
     * the background (counted as spec reads). No numeric effect: get() serves whatever is resident.
     */
    public void speculate(int layer) {
        lock.lock();
        try {
            table.clearRing();
        } finally {
            lock.unlock();
        }
        if (specWorker == null || layer < 0 || layer >= locator.layers()) return;
        int[] ids;
        lock.lock();
        try {
            ids = lastRouting[layer];
        } finally {
            lock.unlock();
        }
        if (ids == null || !specBusy.compareAndSet(false, true)) return;
        try {
            specWorker.execute(() -> {
                try {
                    loadBatch(layer, ids, true);
                } finally {
                    specBusy.set(false);
                }
            });
        } catch (java.util.concurrent.RejectedExecutionException closed) {
            specBusy.set(false);
        }
    }

    /** Waits until no speculative read-ahead is running (tests, and close()). */
    public void awaitSpeculation() {
        while (specBusy.get()) java.util.concurrent.locks.LockSupport.parkNanos(100_000);
    }

    private int loadBatch(int layer, int[] experts, boolean speculative) {
        record Work(int expert, int key, int slot, ExpertLocation loc) {}
        List<Work> work = new ArrayList<>(experts.length);

        // phase 1: resolve outside the lock (an unresolvable or oversized expert is left to get(),
        // which reports it), then reserve serially under it; every reserved slot is INFLIGHT (pitfall 15)
        int[] keys = new int[experts.length];
        Map<Integer, ExpertLocation> where = new HashMap<>();
        for (int i = 0; i < experts.length; i++) {
            int e = experts[i];
            keys[i] = -1;
            if (e < 0 || e >= locator.experts()) continue;
            try {
                where.put(key(layer, e), resolve(layer, e));
                keys[i] = key(layer, e);
            } catch (ExpertLoadException unresolvable) {
                // get() reports it
            }
        }
        lock.lock();
        try {
            for (SlotTable.Reservation r : table.reserveBatch(keys)) {
                count(r);
                work.add(new Work(r.key() % locator.experts(), r.key(), r.slot(), where.get(r.key())));
            }
        } finally {
            lock.unlock();
        }
        if (work.isEmpty()) return 0;

        // phase 2: reads in disk-offset order, concurrently, without the lock
        List<Work> byOffset = new ArrayList<>(work);
        byOffset.sort(Comparator.<Work, String>comparing(w -> w.loc().file().toString()).thenComparingLong(w -> w.loc().offset()));
        long t0 = System.nanoTime();
        List<Future<Long>> reads = new ArrayList<>(byOffset.size());
        for (Work w : byOffset) reads.add(pool.submit(() -> fill(w.loc(), w.slot())));
        long[] pads = new long[work.size()];
        Exception[] failures = new Exception[work.size()];
        for (int i = 0; i < byOffset.size(); i++) {
            int j = work.indexOf(byOffset.get(i));
            try {
                pads[j] = getUninterruptibly(reads.get(i));
            } catch (ExecutionException e) {
                failures[j] = e.getCause() instanceof Exception x ? x : e;
            }
        }
        long dt = System.nanoTime() - t0;

        // phase 3: publish serially, in request order; only full reads are registered
        int landedCount = 0;
        lock.lock();
        try {
            step.readNanos += dt;
            for (int j = 0; j < work.size(); j++) {
                Work w = work.get(j);
                if (failures[j] != null) {
                    table.abandon(w.slot(), w.key());
                    step.failedReads++;
                    continue;
                }
                padOf[w.slot()] = pads[j];
                lengthOf[w.slot()] = form.bytes(w.loc());
                locationOf[w.slot()] = w.loc();
                table.publish(w.slot(), w.key(), true);
                if (speculative) step.specReads++;
                else step.prefetchReads++;
                step.bytesRead += w.loc().length();
                landedCount++;
            }
            landed.signalAll();
        } finally {
            lock.unlock();
        }
        return landedCount;
    }

    private void count(SlotTable.Reservation r) {
        if (r.evictedKey() >= 0) step.evictions++;
        if (r.wastedPrefetch()) step.prefetchWasted++;
    }

    /**
     * Reads {@code loc} and puts it into slot {@code s} in the cache's form; returns where the form starts in the
     * slot. Stored form: the read lands in the slot itself. Any other: the read lands in a scratch buffer of
     * its own (freed on return) and the form is written at the slot's start.
     */
    private long fill(ExpertLocation loc, int s) throws IOException {
        if (form == ExpertForm.STORED) return checkedPad(reader.read(loc, slot(s)), loc.length(), geometry.slotBytes());
        try (Arena scratch = Arena.ofConfined()) {
            long size = CacheGeometry.slotBytes(loc.length());
            MemorySegment buf = DirectIo.allocate(scratch, size);
            long pad = checkedPad(reader.read(loc, buf), loc.length(), size);
            form.fill(loc, buf.asSlice(pad, loc.length()), slot(s).asSlice(0, form.bytes(loc)));
            return 0;
        }
    }

    /** A reader's pad must leave the whole payload inside its buffer. */
    private static long checkedPad(long pad, long length, long room) throws IOException {
        if (pad >= 0 && pad + length <= room) return pad;
        throw new IOException("reader put the payload at " + pad + ", outside a slot of " + room + " bytes");
    }

    private static long getUninterruptibly(Future<Long> f) throws ExecutionException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return f.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) Thread.currentThread().interrupt();
        }
    }

    private ExpertLocation resolve(int layer, int expert) throws ExpertLoadException {
        ExpertLocation loc = locator.locate(layer, expert);
        long room = geometry.slotBytes() - 2 * CacheGeometry.ALIGN;
        long need = Math.max(loc.length(), form.bytes(loc));
        if (need > room) {
            throw new ExpertLoadException(layer, expert, "expert of " + need + " bytes exceeds the slot payload of " + room
                    + " bytes (sized by the probe expert)");
        }
        return loc;
    }

    private MemorySegment slot(int s) {
        return slots.asSlice(s * geometry.slotBytes(), geometry.slotBytes());
    }

    private ResidentExpert view(int s, int layer, int expert) {
        ExpertLocation loc = locationOf[s];
        return new ResidentExpert(layer, expert, slot(s).asSlice(padOf[s], lengthOf[s]).asReadOnly(), loc, form);
    }

    /** Counters since the last {@link #resetStep()}. */
    public CacheStats stepStats() {
        lock.lock();
        try {
            return step.snapshot();
        } finally {
            lock.unlock();
        }
    }

    /** Counters over the whole run (every finished step plus the current one). */
    public CacheStats totalStats() {
        lock.lock();
        try {
            return finished.plus(step.snapshot());
        } finally {
            lock.unlock();
        }
    }

    /** Starts a new generation step: every window counter is reset together (pitfall 17). */
    public void resetStep() {
        lock.lock();
        try {
            finished = finished.plus(step.snapshot());
            step = new Counters();
        } finally {
            lock.unlock();
        }
    }

    public int residentCount() {
        lock.lock();
        try {
            return table.residentCount();
        } finally {
            lock.unlock();
        }
    }

    /** The §6.8 report block: {@code cache [final step]} over the current step, or {@code cache [run]} over the whole run. */
    public String report(boolean wholeRun) {
        lock.lock();
        try {
            CacheStats s = wholeRun ? finished.plus(step.snapshot()) : step.snapshot();
            return (wholeRun ? "cache [run]" : "cache [final step]") + System.lineSeparator()
                    + table.describePolicy() + System.lineSeparator()
                    + String.format(Locale.ROOT, "  slots        : %d of %s = %s arena (%d resident, %d pinned)%n",
                    geometry.slots(), k3j.plan.Human.bytes(geometry.slotBytes()), k3j.plan.Human.bytes(geometry.arenaBytes()), table.residentCount(), 0)
                    + s.lines()
                    + (speculationOn() ? String.format(Locale.ROOT, "  speculation  : %d experts read ahead, %d of the last routing asked for again%n",
                    s.specReads(), s.specUsed()) : "");
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() throws IOException {
        if (specWorker != null) {
            specWorker.shutdown();
            awaitSpeculation();
        }
        pool.shutdownNow();
        lock.lock();
        try {
            if (table.inflightCount() > 0) throw new IllegalStateException("closing the expert cache with reads in flight");
        } finally {
            lock.unlock();
        }
        arena.close();
        if (ownsReader) reader.close();
    }
}
