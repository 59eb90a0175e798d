package k3j.cache;

/** The six tensors of one routed expert (docs/semantics.md §2.5), in the canonical buffer order of §2.6. */
public enum ExpertPart {
    W1_PACKED, W1_SCALE, W2_PACKED, W2_SCALE, W3_PACKED, W3_SCALE;

    static final int COUNT = values().length;
}
