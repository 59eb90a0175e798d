package k3j.model;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertLocator;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.config.MlpKind;
import k3j.io.CheckpointException;
import k3j.io.TensorReader;

/**
 * Routed experts straight from the checkpoint, kept resident once read (the tiny oracle, tests; the real
 * model puts {@link k3j.cache.ExpertCache} behind the same {@link ExpertSource}). Also the
 * {@link ExpertLocator} that wires the cache to the binder's header locations. A contiguous expert is ONE
 * read of its six tensors; otherwise six reads into the canonical layout (docs/semantics.md §2.6).
 */
public final class CheckpointExperts implements ExpertSource, ExpertLocator, AutoCloseable {
    private final ModelBinding binding;
    private final TensorReader reader;
    private final Arena arena = Arena.ofShared();
    private final ConcurrentHashMap<Long, ResidentExpert> resident = new ConcurrentHashMap<>();
    private final AtomicLong reads = new AtomicLong(), bytesRead = new AtomicLong(), gets = new AtomicLong();

    public CheckpointExperts(ModelBinding binding, TensorReader reader) {
        this.binding = binding;
        this.reader = reader;
    }

    @Override
    public int layers() {
        return binding.layers().size();
    }

    @Override
    public int experts() {
        return binding.config().expertCount();
    }

    @Override
    public int probeLayer() {
        for (LayerBinding l : binding.layers()) if (l.mlp() == MlpKind.MOE) return l.index();
        throw new IllegalStateException("the bound layers have no MoE layer");
    }

    @Override
    public ExpertLocation locate(int layer, int expert) throws ExpertLoadException {
        if (layer < 0 || layer >= binding.layers().size()) throw new ExpertLoadException(layer, expert, "layer not bound");
        List<ExpertLocation> l = binding.layers().get(layer).experts();
        if (l.isEmpty()) throw new ExpertLoadException(layer, expert, "a dense layer has no routed experts");
        if (expert < 0 || expert >= l.size()) throw new ExpertLoadException(layer, expert, "no such expert (the layer has " + l.size() + ")");
        return l.get(expert);
    }

    @Override
    public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
        gets.incrementAndGet();
        long key = (long) layer * experts() + expert;
        ResidentExpert r = resident.get(key);
        if (r != null) return r;
        ExpertLocation loc = locate(layer, expert);
        MemorySegment bytes;
        try {
            if (loc.contiguous()) {
                bytes = reader.read(loc.file(), loc.offset(), loc.length(), "layer " + layer + " expert " + expert, arena);
                reads.incrementAndGet();
            } else {
                bytes = arena.allocate(loc.length(), 64);
                long at = 0;
                for (ExpertLocation.Extent e : loc.parts()) {
                    MemorySegment part = reader.read(loc.file(), e.offset(), e.length(), "layer " + layer + " expert " + expert, arena);
                    MemorySegment.copy(part, 0, bytes, at, e.length());
                    at += e.length();
                    reads.incrementAndGet();
                }
            }
        } catch (CheckpointException e) {
            throw new ExpertLoadException(layer, expert, e.getMessage(), e);
        }
        bytesRead.addAndGet(loc.length());
        ResidentExpert raced = resident.putIfAbsent(key, new ResidentExpert(layer, expert, bytes, loc));
        return raced != null ? raced : resident.get(key);
    }

    @Override
    public int getMany(int layer, int... experts) {
        return 0;
    }

    /** File reads issued (one per contiguous expert). */
    public long reads() {
        return reads.get();
    }

    public long bytesRead() {
        return bytesRead.get();
    }

    public long gets() {
        return gets.get();
    }

    @Override
    public void close() {
        resident.clear();
        arena.close();
    }
}
