package k3j.api;

/**
 * A forward that could not go on: the trunk unreadable mid-run, or a position past the state's room; the message says
 * where. {@link #invalid()} when what it read cannot be trusted (corrupt weights, a dropped expert).
 */
public final class RunFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Whether the run read weights it cannot trust. */
    private final boolean invalid;

    RunFailed(RuntimeException cause) {
        super(cause.getMessage(), cause);
        this.invalid = cause instanceof k3j.model.CorruptWeightsException || cause instanceof k3j.model.ExpertDropException;
    }

    /** {@return whether the run is invalid: it read corrupt weights or dropped a routed expert, so no id it made can be trusted} */
    public boolean invalid() {
        return invalid;
    }
}
