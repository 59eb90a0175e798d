package k3j.trunk;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * Streams a packed trunk under a byte budget (docs/semantics.md §5.4-5.5): the {@link TrunkPlan}'s pinned layers
 * are read once on first use and kept; the others rotate through a ring of slots, read with O_DIRECT into
 * 4096-aligned off-heap memory. With two or more slots a reader thread reads the next layers while the
 * caller computes on the one it holds; with ONE slot no reader thread is started (pitfall 14: a reader
 * refilling the only slot overwrote the layer being computed and produced fluent wrong tokens).
 *
 * <p>A slot is EMPTY, PENDING (claimed for a layer, queued or being read into) or RESIDENT (a layer
 * published), and a resident slot may be HELD by the caller. A claim never takes a pending slot, a held
 * slot, or one holding a layer the walk reaches within the next {@code ring} streamed layers (pitfall 16:
 * evicting those re-read 491 GB). A layer is published to its slot only after its whole run was read; a
 * failed read leaves the slot EMPTY and is reported by {@link #acquire} of that layer.
 */
public final class TrunkStream implements TrunkSource {
    private static final class Slot {
        MemorySegment buffer;
        int layer = -1;     // RESIDENT layer, or -1
        int pending = -1;   // PENDING layer (queued or being read into), or -1
        int holds;
        final java.util.List<Arena> scopes = new java.util.ArrayList<>();   // one per outstanding acquire
    }

    private record Request(int layer, int slot) {}

    private static final int PIN_NONE = 0, PIN_LOADING = 1, PIN_LOADED = 2;

    private final TrunkManifest manifest;
    private final TrunkPlan plan;
    /** set by {@link #open(java.nio.file.Path, k3j.io.CheckpointIndex, int, StreamOptions)} once the binding is checked */
    private DataBinding.Result binding;
    /** set by the same open when {@link StreamOptions#witness()}: every layer read is compared with the checkpoint's bytes */
    private volatile ShardWitness witness;
    private final StreamOptions options;
    private final DirectReader reader;
    private final Arena arena = Arena.ofShared();
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final int n;
    private final Slot[] slots;
    private final int[] slotOf;
    private final MemorySegment[] pinBuffer;
    private final int[] pinState;
    private final RuntimeException[] readFailure;
    /** rank[L]: position of unpinned layer L among the unpinned layers; after[L]: rank of the first unpinned layer after L. */
    private final int[] rank, after;
    private final int streamed;
    private final ArrayDeque<Request> queue = new ArrayDeque<>();
    private final Thread readerThread;
    private int walk = -1;
    private int cursor;
    private boolean closed;
    private long pinnedHits, ringHits, misses, reads, prefetchReads, failedReads, bytesRead, readNanos, callerReadNanos,
            waitNanos, acquireNanos, widenNanos;

    private TrunkStream(TrunkManifest manifest, TrunkPlan plan, StreamOptions options, DirectReader reader) {
        this.manifest = manifest;
        this.plan = plan;
        this.options = options;
        this.reader = reader;
        this.n = plan.layers();
        this.slots = new Slot[plan.ring()];
        for (int i = 0; i < slots.length; i++) slots[i] = new Slot();
        this.slotOf = new int[n];
        java.util.Arrays.fill(slotOf, -1);
        this.pinBuffer = new MemorySegment[n];
        this.pinState = new int[n];
        this.readFailure = new RuntimeException[n];
        this.rank = new int[n];
        this.after = new int[n];
        int u = 0;
        for (int l = 0; l < n; l++) rank[l] = plan.isPinned(l) ? -1 : u++;
        this.streamed = u;
        for (int l = n - 1, next = -1, k = 0; k < 2 * n; k++, l = (l - 1 + n) % n) {
            // walking backwards twice around the cycle: after[l] is the rank of the next unpinned layer > l
            after[l] = next;
            if (rank[l] >= 0) next = rank[l];
        }
        if (slots.length >= 2) {
            readerThread = Thread.ofPlatform().daemon().name("k3-trunk-reader").unstarted(this::readLoop);
            readerThread.start();
        } else {
            readerThread = null;   // pitfall 14: never with one slot
        }
    }

    /**
     * What the run does: reads {@code dir/trunk.json}, refuses a trunk packed from other weights than
     * {@code checkpoint} or with fewer layers than {@code modelLayers}, then plans and opens it. Print
     * {@link #describe()} next, and {@link TrunkStats#report()} of {@link #stats()} at the end.
     */
    public static TrunkStream open(java.nio.file.Path dir, k3j.io.CheckpointIndex checkpoint, int modelLayers, StreamOptions options) {
        TrunkManifest m = TrunkManifest.read(dir);
        int need = options.layers() > 0 ? Math.min(options.layers(), modelLayers) : modelLayers;
        if (m.layerCount() < need) {
            throw new TrunkException(m.json(), TrunkException.NO_LAYER, "the packed trunk has " + m.layerCount() + " layers, the run needs "
                    + need + "; repack with k3 pack-trunk");
        }
        DataBinding.Result binding = m.checkSource(checkpoint, options.check());
        ShardWitness w = options.witness() ? ShardWitness.of(checkpoint) : null;
        TrunkStream s = open(m, options.layers() > 0 ? options : options.withLayers(modelLayers));
        s.binding = binding;
        s.witness = w;
        return s;
    }

    /**
     * The plan {@link #open(TrunkManifest, StreamOptions)} makes: {@code options.budgetBytes()} over the runs of the layers
     * walked. Its {@link TrunkPlan#totalBytes()} is what the stream will hold, which is less than the budget when the
     * whole trunk fits (the memory plan prints that, not the budget).
     */
    public static TrunkPlan plan(TrunkManifest manifest, StreamOptions options) {
        long[] runs = manifest.runSizes();
        if (options.layers() > runs.length) {
            throw new TrunkException(manifest.json(), TrunkException.NO_LAYER, "the packed trunk has " + runs.length + " layers, "
                    + options.layers() + " requested");
        }
        if (options.layers() > 0) runs = java.util.Arrays.copyOf(runs, options.layers());
        return TrunkPlan.of(runs, options.budgetBytes(), options.ring(), options.order());
    }

    /** Plans {@code options.budgetBytes()} over the runs of the layers walked ({@link #plan}) and opens trunk.bin. */
    public static TrunkStream open(TrunkManifest manifest, StreamOptions options) {
        TrunkPlan plan = plan(manifest, options);
        DirectReader reader = DirectReader.open(manifest.bin(), options.direct(), options.notes());
        long size = reader.size();
        if (size != manifest.fileSize()) {
            reader.close();
            throw new TrunkException(manifest.bin(), TrunkException.NO_LAYER, "is " + size + " bytes, trunk.json says " + manifest.fileSize());
        }
        return new TrunkStream(manifest, plan, options, reader);
    }

    public TrunkPlan plan() {
        return plan;
    }

    /** What the data binding check at open did (null when opened from a manifest alone, without a checkpoint). */
    public DataBinding.Result binding() {
        return binding;
    }

    public TrunkManifest manifest() {
        return manifest;
    }

    /** Whether reads bypass the page cache. */
    public boolean direct() {
        return reader.direct();
    }

    /** Whether the asynchronous reader runs (never with one ring slot). */
    public boolean readerRunning() {
        return readerThread != null && readerThread.isAlive();
    }

    /** What the startup lines say when every layer read is compared with the checkpoint ({@link StreamOptions#witness()}). */
    public static final String WITNESS_LINE = "trunk witness: every layer read from trunk.bin is compared byte for byte with the checkpoint's shards,"
            + " and trunk.json's digests with their hash, before it is used";

    /** The startup lines: the plan, then the read method, then the data binding check. */
    public String describe() {
        return plan.describe() + "              reads use " + (reader.direct() ? "O_DIRECT (page cache bypassed)" : "buffered reads (page cache)")
                + ", positional reads at queue depth 1 per thread, " + (readerThread != null ? "reader thread prefetching" : "no reader thread") + "\n"
                + (binding != null ? "              " + binding.line() + "\n" : "")
                + (witness != null ? "              " + WITNESS_LINE + "\n" : "");
    }

    @Override
    public int layerCount() {
        return n;
    }

    /** The ring slot layer {@code l} is published in, or -1 (not resident in the ring). */
    public int slotOf(int l) {
        lock.lock();
        try {
            return slotOf[l];
        } finally {
            lock.unlock();
        }
    }

    /** Waits until no read is queued or in flight (tests, benchmarks). */
    public void awaitIdle() {
        lock.lock();
        try {
            while (!queue.isEmpty() || anyPending()) changed.awaitUninterruptibly();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public LayerBytes acquire(int l) {
        if (l < 0 || l >= n) throw new IllegalArgumentException("layer " + l + " is outside 0.." + (n - 1));
        long t0 = System.nanoTime();
        try {
            LayerBytes b;
            lock.lock();
            try {
                checkOpen();
                walk = l;
                b = plan.isPinned(l) ? acquirePinned(l, manifest.layer(l)) : acquireRing(l, manifest.layer(l));
            } finally {
                lock.unlock();
            }
            prefetch();
            return b;
        } finally {
            long dt = System.nanoTime() - t0;
            lock.lock();
            acquireNanos += dt;
            lock.unlock();
        }
    }

    /** Layer {@code l} from its pinned buffer, read on first use (lock held). */
    private LayerBytes acquirePinned(int l, TrunkManifest.Layer layer) {
        while (pinState[l] == PIN_LOADING) changed.awaitUninterruptibly();
        if (pinState[l] == PIN_LOADED) {
            pinnedHits++;
            return new LayerBytes(this, layer, manifest.bin(), pinBuffer[l], true, -1, null);
        }
        if (pinBuffer[l] == null) pinBuffer[l] = allocate(layer.padded());   // before any state changes
        pinState[l] = PIN_LOADING;
        RuntimeException failed = readByCaller(layer, l, pinBuffer[l]);
        changed.signalAll();
        if (failed != null) {
            pinState[l] = PIN_NONE;
            throw bindFailed(l, failed);
        }
        pinState[l] = PIN_LOADED;
        misses++;
        return new LayerBytes(this, layer, manifest.bin(), pinBuffer[l], true, -1, null);
    }

    /** Layer {@code l} in a ring slot: a hit, a prefetch to wait for, or a read into a claimed slot (lock held). */
    @SuppressWarnings("restricted")   // a view of the slot scoped to one acquire
    private LayerBytes acquireRing(int l, TrunkManifest.Layer layer) {
        int s = slotOf[l];
        boolean hit = s >= 0;
        RuntimeException earlier = null;
        while (s < 0) {
            if (pendingSlot(l) >= 0) {
                s = awaitChange(l);
                continue;
            }
            if (readFailure[l] != null) {
                // the reader's prefetch of l failed: try once more here, and report both if that fails too
                earlier = readFailure[l];
                readFailure[l] = null;
            }
            int c = claim(l, true);
            if (c < 0) {
                if (anyPending()) {
                    s = awaitChange(l);
                    continue;
                }
                throw new IllegalStateException("trunk: no ring slot free for layer " + l + ": all " + slots.length
                        + " slots are held; release the previous layer before acquiring the next");
            }
            Slot slot = slots[c];
            RuntimeException failed = readByCaller(layer, l, slot.buffer);
            slot.pending = -1;
            changed.signalAll();
            if (failed != null) {
                RuntimeException e = bindFailed(l, failed);
                if (earlier != null) e.addSuppressed(earlier);
                throw e;
            }
            publish(c, l);
            s = c;
        }
        Slot slot = slots[s];
        slot.holds++;
        if (hit) ringHits++;
        else misses++;
        Arena scope = Arena.ofShared();
        slot.scopes.add(scope);
        MemorySegment view = slot.buffer.reinterpret(scope, null);
        return new LayerBytes(this, layer, manifest.bin(), view, false, s, () -> {
            slot.scopes.remove(scope);
            scope.close();
        });
    }

    /** Waits for the next change (a read landing, a slot released), counted as waiting; then layer {@code l}'s slot (lock held). */
    private int awaitChange(int l) {
        long w = System.nanoTime();
        changed.awaitUninterruptibly();
        waitNanos += System.nanoTime() - w;
        checkOpen();
        return slotOf[l];
    }

    @Override
    public void release(LayerBytes b) {
        lock.lock();
        try {
            if (b.released) throw new IllegalStateException("trunk: " + b + " released twice");
            b.released = true;
            if (!b.pinned()) {
                Slot s = slots[b.slot()];
                if (s.holds <= 0 || s.layer != b.layer()) throw new IllegalStateException("trunk: " + b + " is not held");
                s.holds--;
                b.invalidate.run();   // every segment of this acquire now throws instead of reading the next layer
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
        prefetch();
    }

    /** Queues reads of the next streamed layers after the walk position into claimable slots (reader thread only). */
    private void prefetch() {
        if (readerThread == null) return;
        lock.lock();
        try {
            if (closed || walk < 0 || streamed == 0) return;
            int first = after[walk];
            // look as far ahead as there are slots not held: R-1 while the caller holds a layer, R once it released it,
            // so the reader goes on to the next read without waiting for the caller's next acquire
            int held = 0;
            for (Slot s : slots) if (s.holds > 0) held++;
            for (int d = 0; d < slots.length - held && d < streamed; d++) {
                int l = layerOfRank((first + d) % streamed);
                if (slotOf[l] >= 0 || pendingSlot(l) >= 0) continue;
                int c = claim(l, false);
                if (c < 0) break;
                queue.add(new Request(l, c));
                changed.signalAll();
            }
        } finally {
            lock.unlock();
        }
    }

    private int layerOfRank(int r) {
        for (int l = 0; l < n; l++) if (rank[l] == r) return l;
        throw new IllegalStateException("no streamed layer of rank " + r);
    }

    /** Streamed layers from the walk position to {@code l} (1 = the next one); large when l is behind. */
    private int distance(int l) {
        if (walk < 0) return Integer.MAX_VALUE;
        return (rank[l] - after[walk] + streamed) % streamed + 1;
    }

    /**
     * Claims a slot for layer {@code l}: the first from the cursor that is not pending, not held and not holding
     * a layer within the next {@code ring} streamed layers. With {@code lastResort} and none such but nothing in
     * flight either, the unheld slot whose layer is reached LAST is taken rather than failing.
     */
    private int claim(int l, boolean lastResort) {
        int take = -1;
        for (int k = 0; k < slots.length && take < 0; k++) {
            int s = (cursor + k) % slots.length;
            Slot slot = slots[s];
            if (slot.pending >= 0 || slot.holds > 0) continue;
            if (slot.layer >= 0 && distance(slot.layer) <= slots.length) continue;
            take = s;
        }
        if (take < 0 && lastResort && !anyPending()) {
            int far = -1;
            for (int s = 0; s < slots.length; s++) {
                Slot slot = slots[s];
                if (slot.pending >= 0 || slot.holds > 0) continue;
                int d = slot.layer < 0 ? Integer.MAX_VALUE : distance(slot.layer);
                if (d > far) {
                    far = d;
                    take = s;
                }
            }
        }
        if (take < 0) return -1;
        Slot slot = slots[take];
        if (slot.buffer == null) slot.buffer = allocate(plan.slotBytes());   // before any state changes: may fail
        cursor = (take + 1) % slots.length;
        if (slot.layer >= 0) slotOf[slot.layer] = -1;   // unpublish the old layer
        slot.layer = -1;
        slot.pending = l;
        return take;
    }

    private void publish(int s, int l) {
        slots[s].layer = l;
        slotOf[l] = s;
    }

    private int pendingSlot(int l) {
        for (int s = 0; s < slots.length; s++) if (slots[s].pending == l) return s;
        return -1;
    }

    private boolean anyPending() {
        for (Slot s : slots) if (s.pending >= 0) return true;
        return false;
    }

    private void readLoop() {
        while (true) {
            Request r;
            lock.lock();
            try {
                while (queue.isEmpty() && !closed) changed.awaitUninterruptibly();
                if (closed) return;
                r = queue.poll();
            } finally {
                lock.unlock();
            }
            TrunkManifest.Layer layer = manifest.layer(r.layer());
            MemorySegment buffer = slots[r.slot()].buffer;
            long t = System.nanoTime();
            RuntimeException failed = readLayer(layer, r.layer(), buffer);
            long dt = System.nanoTime() - t;
            lock.lock();
            try {
                counted(layer, dt, failed);
                slots[r.slot()].pending = -1;
                if (failed == null) {
                    prefetchReads++;
                    readFailure[r.layer()] = null;
                    publish(r.slot(), r.layer());
                } else {
                    readFailure[r.layer()] = failed;   // nothing published: the slot stays EMPTY
                }
                changed.signalAll();
            } finally {
                lock.unlock();
            }
        }
    }

    /**
     * Reads layer {@code l} into {@code dst} on the calling thread. Called with the lock held; it is released for
     * the read (the reader and other callers go on meanwhile) and held again on return, the read counted.
     * Returns the failure, or null when the bytes arrived.
     */
    private RuntimeException readByCaller(TrunkManifest.Layer layer, int l, MemorySegment dst) {
        RuntimeException failed;
        long dt;
        lock.unlock();
        try {
            long t = System.nanoTime();
            failed = readLayer(layer, l, dst);
            dt = System.nanoTime() - t;
        } finally {
            lock.lock();
        }
        callerReadNanos += dt;
        counted(layer, dt, failed);
        return failed;
    }

    /** Counts one finished read of {@code layer}, by the reader thread or a caller (lock held). */
    private void counted(TrunkManifest.Layer layer, long dt, RuntimeException failed) {
        readNanos += dt;
        if (failed != null) {
            failedReads++;
        } else {
            reads++;
            bytesRead += layer.padded();
        }
    }

    /** Reads layer {@code l} into {@code dst}; returns the failure (an Error wrapped as a TrunkException), null when it arrived. */
    private RuntimeException readLayer(TrunkManifest.Layer layer, int l, MemorySegment dst) {
        try {
            reader.read(layer.offset(), layer.padded(), dst, l);
            if (options.verifyCrc()) {
                int crc = LayerCrc.of(dst, layer.nbytes());
                if (crc != layer.crc32c()) {
                    return TrunkException.corrupt(manifest.bin(), l, "CRC-32C of the bytes read is " + TrunkManifest.hex(crc) + ", the manifest's "
                            + TrunkManifest.hex(layer.crc32c()) + ": trunk.bin changed since it was packed");
                }
            }
            if (witness != null) witness.check(layer, dst, manifest.bin());
            return null;
        } catch (RuntimeException e) {
            return e;
        } catch (Error e) {
            return new TrunkException(manifest.bin(), l, "read failed: " + e, e);
        }
    }

    private MemorySegment allocate(long bytes) {
        return AlignedMemory.allocate(arena, bytes, options.hugeAlign());
    }

    private TrunkException bindFailed(int l, RuntimeException cause) {
        return new TrunkException(manifest.bin(), l, "trunk bind failed: " + cause.getMessage(), cause);
    }

    private void checkOpen() {
        if (closed) throw new IllegalStateException("trunk: the stream is closed");
    }

    @Override
    public void recordWiden(long nanos) {
        lock.lock();
        try {
            widenNanos += nanos;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public TrunkStats stats() {
        lock.lock();
        try {
            return new TrunkStats(n, plan.pinnedCount(), slots.length, reader.direct(), readerThread != null, pinnedHits, ringHits,
                    misses, reads, prefetchReads, failedReads, bytesRead, readNanos, callerReadNanos, waitNanos, acquireNanos, widenNanos);
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) return;
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
        if (readerThread != null) {
            try {
                readerThread.join(TimeUnit.MINUTES.toMillis(5));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        lock.lock();
        try {
            for (Slot s : slots) {
                for (Arena a : s.scopes) a.close();   // views still held must throw, not read freed memory
                s.scopes.clear();
            }
        } finally {
            lock.unlock();
        }
        reader.close();
        arena.close();
    }
}
