package k3j.trunk;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Map;
import k3j.io.TensorInfo;

/**
 * One layer's trunk run in memory, from {@link TrunkSource#acquire}: its tensors by their checkpoint
 * names (e.g. {@code language_model.model.layers.5.self_attn.q_proj.weight}) as read-only segments of the
 * checkpoint's raw bytes (little-endian, the dtype the manifest gives). Valid until {@link #close} / {@link TrunkSource#release}.
 */
public final class LayerBytes implements AutoCloseable {
    private final TrunkSource owner;
    private final TrunkManifest.Layer layer;
    private final Path bin;
    private final MemorySegment run;
    private final boolean pinned;
    private final int slot;
    final Runnable invalidate;
    boolean released;

    LayerBytes(TrunkSource owner, TrunkManifest.Layer layer, Path bin, MemorySegment buffer, boolean pinned,
               int slot, Runnable invalidate) {
        this.owner = owner;
        this.layer = layer;
        this.bin = bin;
        this.run = buffer.asSlice(0, layer.nbytes()).asReadOnly();
        this.pinned = pinned;
        this.slot = slot;
        this.invalidate = invalidate;
    }

    public int layer() {
        return layer.layer();
    }

    /** Whether the layer has its own buffer for the whole run (a pinned layer) rather than a ring slot. */
    public boolean pinned() {
        return pinned;
    }

    /** The ring slot holding the layer, or -1 for a pinned layer. */
    public int slot() {
        return slot;
    }

    /** The whole run: {@code nbytes} bytes, read-only. */
    public MemorySegment run() {
        return run;
    }

    /** The manifest's tensors of this layer, by name (offsets relative to the run). */
    public Map<String, TrunkManifest.Tensor> tensors() {
        return layer.tensors();
    }

    /** The tensor's bytes; a name this layer lacks is a {@link TrunkException}. */
    public MemorySegment tensor(String name) {
        TrunkManifest.Tensor t = meta(name);
        return run.asSlice(t.offset(), t.length());
    }

    /** The tensor's dtype, shape and offset within the run. */
    public TrunkManifest.Tensor meta(String name) {
        TrunkManifest.Tensor t = layer.tensors().get(name);
        if (t == null) throw new TrunkException(bin, layer.layer(), "no tensor \"" + name + "\" in this layer's run");
        return t;
    }

    /**
     * The tensor as a {@link TensorInfo} over trunk.bin: {@code offset} is ABSOLUTE in trunk.bin (run offset +
     * offset within the run), as TensorInfo's contract says, and {@code shard} is -1 (a packed trunk, not a shard).
     */
    public TensorInfo info(String name) {
        TrunkManifest.Tensor t = meta(name);
        return new TensorInfo(t.name(), -1, bin, t.dtype(), t.shape().clone(), layer.offset() + t.offset(), t.length());
    }

    @Override
    public void close() {
        owner.release(this);
    }

    @Override
    public String toString() {
        return "layer " + layer.layer() + (pinned ? " (pinned)" : " (ring slot " + slot + ")");
    }
}
