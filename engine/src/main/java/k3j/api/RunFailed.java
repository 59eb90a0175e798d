package k3j.api;

/** A forward that could not go on: the trunk unreadable mid-run, or a position past the state's room; the message says where. */
public final class RunFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RunFailed(RuntimeException cause) {
        super(cause.getMessage(), cause);
    }
}
