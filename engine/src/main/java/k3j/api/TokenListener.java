package k3j.api;

/** Told each generated token as it is chosen: its step (0-based), its id and the seconds the step took. */
@FunctionalInterface
public interface TokenListener {
    /**
     * Ignores every token.
     */
    TokenListener NONE = (step, id, seconds) -> {};

    /**
     * Told one token as it is chosen.
     *
     * @param step the step, 0-based
     * @param id the id chosen
     * @param seconds the seconds the step took
     */
    void token(int step, int id, double seconds);
}
