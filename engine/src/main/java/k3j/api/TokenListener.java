package k3j.api;

/** Told each generated token as it is chosen: its step (0-based), its id and the seconds the step took. */
@FunctionalInterface
public interface TokenListener {
    TokenListener NONE = (step, id, seconds) -> {};

    void token(int step, int id, double seconds);
}
