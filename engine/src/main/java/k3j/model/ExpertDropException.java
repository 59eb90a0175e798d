package k3j.model;

/**
 * Routed experts failed to load during a layer: the MoE sum would be partial, so the forward fails and the
 * run is INVALID (docs/semantics.md §4.2 step 4, §7.9 exit 4). Never a silent drop.
 */
public final class ExpertDropException extends ForwardException {
    private final int layer;
    private final long drops;

    public ExpertDropException(int layer, long drops, java.util.List<Integer> experts, String firstFailure) {
        super("routed expert load failed at layer " + layer + " (" + drops + " drop(s), expert(s) " + experts
                + "; first: " + firstFailure + "); refusing partial MoE output");
        this.layer = layer;
        this.drops = drops;
    }

    public int layer() {
        return layer;
    }

    public long drops() {
        return drops;
    }
}
