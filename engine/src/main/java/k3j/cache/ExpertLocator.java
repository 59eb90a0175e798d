package k3j.cache;

/**
 * Resolves (layer, expert) to its bytes on disk (from the safetensors index, or a test layout).
 * Keys are {@code layer · experts() + expert} over {@code layers()} layers (docs/semantics.md §6.1).
 */
public interface ExpertLocator {
    int layers();

    int experts();

    /** The layer whose expert 0 sizes the slots: the first non-dense layer (§6.1). */
    int probeLayer();

    /** The expert's location; an expert the checkpoint does not have is an exception naming it. */
    ExpertLocation locate(int layer, int expert) throws ExpertLoadException;
}
