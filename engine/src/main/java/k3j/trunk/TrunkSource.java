package k3j.trunk;

/**
 * Where the forward gets each layer's trunk tensors (everything of a layer but its routed experts). The
 * forward walks the layers in order, every token:
 *
 * <pre>
 * for (int l = 0; l &lt; layers; l++) {
 *     try (LayerBytes w = trunk.acquire(l)) {     // blocks until layer l's run is in memory
 *         MemorySegment q = w.tensor("language_model.model.layers." + l + ".self_attn.q_proj.weight");
 *         ... compute layer l ...
 *     }                                           // release: the slot may now be reused
 * }
 * </pre>
 *
 * A {@link LayerBytes} and every segment taken from it are valid only until it is released (a ring slot is
 * then refilled with another layer; touching a released segment throws instead of reading another
 * layer's bytes). {@link #acquire} of layer l also starts reading the next layers in the background when
 * the source can. A failed or short read throws {@link TrunkException} from {@link #acquire}: the forward
 * must fail and the run exit non-zero, never compute on a partial layer.
 */
public interface TrunkSource extends AutoCloseable {

    int layerCount();

    /** Layer {@code layer}'s run, in memory, held until {@link #release} (or {@link LayerBytes#close}). */
    LayerBytes acquire(int layer);

    /** Gives back a layer from {@link #acquire}; releasing one twice is an error. */
    void release(LayerBytes bytes);

    /** Adds binder time spent widening this source's tensors (docs/semantics.md §5.5), for the final report's bind wall line. */
    default void recordWiden(long nanos) {}

    /** A snapshot of the counters. */
    TrunkStats stats();

    /** Stops the reader and frees every buffer; segments still held become invalid. */
    @Override
    void close();
}
