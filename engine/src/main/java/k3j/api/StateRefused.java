package k3j.api;

/**
 * A saved decode state that cannot be written, or that this model or conversation must not load: made for other
 * weights, following another conversation, damaged, or holding more positions than the model may. The message names
 * the file and the reason.
 */
public final class StateRefused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StateRefused(RuntimeException cause) {
        super(cause.getMessage(), cause);
    }

    StateRefused(String message) {
        super(message);
    }
}
