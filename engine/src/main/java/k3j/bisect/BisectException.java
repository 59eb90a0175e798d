package k3j.bisect;

/** Bisect cannot run: an unreadable dump, a dump that does not fit the model, a bad corruption request. */
public final class BisectException extends RuntimeException {
    public BisectException(String message) {
        super(message);
    }

    public BisectException(String message, Throwable cause) {
        super(message, cause);
    }
}
