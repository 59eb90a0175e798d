package k3j.planted.dump;

/** The planted dump reader's own refusal: an exception of a package below the API. */
public final class DumpRefused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DumpRefused(String message) {
        super(message);
    }
}
