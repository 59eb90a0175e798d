package k3j.cache;

/** What the MoE calls for routed experts: a batch prefetch of the top-k, then one get per expert. */
public interface ExpertSource {
    /**
     * Makes (layer, expert) resident and returns its bytes; counts a hit or a miss. Throws, never
     * returns stale or partial bytes; the forward counts the expert as dropped (run INVALID).
     */
    ResidentExpert get(int layer, int expert) throws ExpertLoadException;

    /**
     * Batch-prefetches this layer's top-k (docs/semantics.md §6.5): reads run in disk-offset order, in
     * parallel. Returns how many were brought resident; a short count is not an error (get()
     * reads or reports the rest).
     */
    int getMany(int layer, int... experts);
}
