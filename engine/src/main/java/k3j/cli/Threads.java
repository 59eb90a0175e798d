package k3j.cli;

/** The worker thread count of the --threads option shared by run, conform and bisect. */
final class Threads {
    private Threads() {}

    /** The requested count, or every processor available to the JVM when --threads was not given. */
    static int orAvailable(Integer requested) {
        return requested != null ? requested : Runtime.getRuntime().availableProcessors();
    }
}
