package k3j.cache;

/**
 * A routed expert could not be made resident: unresolvable, oversized, a failed or short read, or
 * no slot free. Nothing was served; the forward counts a dropped expert and the run is INVALID
 * (docs/semantics.md §11 pitfall 19, exit 4).
 */
public final class ExpertLoadException extends Exception {
    private final int layer;
    private final int expert;

    public ExpertLoadException(int layer, int expert, String message, Throwable cause) {
        super("L" + layer + " expert " + expert + ": " + message, cause);
        this.layer = layer;
        this.expert = expert;
    }

    public ExpertLoadException(int layer, int expert, String message) {
        this(layer, expert, message, null);
    }

    public int layer() {
        return layer;
    }

    public int expert() {
        return expert;
    }
}
