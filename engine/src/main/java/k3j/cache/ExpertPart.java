package k3j.cache;

/**
 * The six tensors of one routed expert (docs/semantics.md §2.5), in the canonical buffer order of §2.6, with
 * their checkpoint suffixes after {@code block_sparse_moe.experts.<M>.}.
 */
public enum ExpertPart {
    W1_PACKED("w1.weight_packed"), W1_SCALE("w1.weight_scale"),
    W2_PACKED("w2.weight_packed"), W2_SCALE("w2.weight_scale"),
    W3_PACKED("w3.weight_packed"), W3_SCALE("w3.weight_scale");

    static final int COUNT = values().length;

    private final String suffix;

    ExpertPart(String suffix) {
        this.suffix = suffix;
    }

    public String suffix() {
        return suffix;
    }
}
