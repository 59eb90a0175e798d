package k3j.trunk;

import java.util.function.Consumer;

/**
 * How a {@link TrunkStream} reads the trunk.
 *
 * @param budgetBytes the trunk budget (--trunk-gb × 1e9)
 * @param ring        ring slots wanted (--trunk-ring; 0 means 2, clamped to 1..8)
 * @param order       pinning order
 * @param direct      try O_DIRECT
 * @param hugeAlign   2 MiB-aligned buffers (K3_NOHUGE turns it off; no numeric effect)
 * @param notes       where one-time notes go (O_DIRECT refused)
 * @param layers      layers the forward walks, 0..layers-1 (--layers N); 0 means all the trunk has
 * @param verifyCrc   check every read layer's CRC-32C against the manifest (pinned layers once, ring slots on every read)
 * @param check       how the trunk's data binding to the checkpoint is checked at open ({@link DataBinding.Check})
 * @param witness     compare every layer read with the checkpoint's own bytes before it is used ({@link ShardWitness}):
 *                    what conform and bisect run, so that a verdict over a trunk is a verdict over the model
 */
public record StreamOptions(long budgetBytes, int ring, TrunkPlan.Order order, boolean direct,
                     boolean hugeAlign, Consumer<String> notes, int layers, boolean verifyCrc, DataBinding.Check check, boolean witness) {
    public static StreamOptions budget(long bytes) {
        return new StreamOptions(bytes, 2, TrunkPlan.orderFromEnvironment(), true, System.getenv("K3_NOHUGE") == null,
                s -> System.err.println("k3: note: " + s), 0, true, DataBinding.Check.FAST, false);
    }

    public StreamOptions withRing(int r) {
        return new StreamOptions(budgetBytes, r, order, direct, hugeAlign, notes, layers, verifyCrc, check, witness);
    }

    public StreamOptions withOrder(TrunkPlan.Order o) {
        return new StreamOptions(budgetBytes, ring, o, direct, hugeAlign, notes, layers, verifyCrc, check, witness);
    }

    public StreamOptions withNotes(Consumer<String> n) {
        return new StreamOptions(budgetBytes, ring, order, direct, hugeAlign, n, layers, verifyCrc, check, witness);
    }

    public StreamOptions withLayers(int l) {
        return new StreamOptions(budgetBytes, ring, order, direct, hugeAlign, notes, l, verifyCrc, check, witness);
    }

    /** How the data binding is checked at open: {@link DataBinding.Check#FAST} (default) or FULL. */
    public StreamOptions withCheck(DataBinding.Check c) {
        return new StreamOptions(budgetBytes, ring, order, direct, hugeAlign, notes, layers, verifyCrc, c, witness);
    }

    /** Compare every layer read with the checkpoint's bytes ({@link ShardWitness}); needs {@link TrunkStream#open(java.nio.file.Path, k3j.io.CheckpointIndex, int, StreamOptions)}. */
    public StreamOptions withWitness(boolean w) {
        return new StreamOptions(budgetBytes, ring, order, direct, hugeAlign, notes, layers, verifyCrc, check, w);
    }

    /** Check every read layer's CRC-32C against trunk.json (pinned layers once, ring slots on every read). */
    public StreamOptions withVerifyCrc(boolean v) {
        return new StreamOptions(budgetBytes, ring, order, direct, hugeAlign, notes, layers, v, check, witness);
    }
}
