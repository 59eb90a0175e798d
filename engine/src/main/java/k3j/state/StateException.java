package k3j.state;

/** A state file that cannot be saved, or that this model must not load; the message names the file and the reason. */
public final class StateException extends RuntimeException {
    public StateException(String message) {
        super(message);
    }

    public StateException(String message, Throwable cause) {
        super(message, cause);
    }
}
