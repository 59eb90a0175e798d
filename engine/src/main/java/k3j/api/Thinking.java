package k3j.api;

/**
 * A chat's thinking channel: on, with an effort the rendered system message announces ({@code low},
 * {@code high} or {@code max}), or off.
 *
 * @param on     whether the model thinks before it answers
 * @param effort low, high or max
 */
public record Thinking(boolean on, String effort) {
    /** On, at the greatest effort. */
    public static final Thinking DEFAULT = new Thinking(true, "max");
    /** Off. */
    public static final Thinking OFF = new Thinking(false, "max");

    /**
     * Checks the effort is low, high or max.
     */
    public Thinking {
        chat(on, effort);   // the renderer's own checks, with its messages
    }

    k3j.chat.Thinking chat() {
        return chat(on, effort);
    }

    private static k3j.chat.Thinking chat(boolean on, String effort) {
        if (effort == null) throw new IllegalArgumentException("a thinking effort is required (low, high or max)");
        return new k3j.chat.Thinking(on, effort);
    }

    @Override
    public String toString() {
        return on ? "thinking on, effort " + effort : "thinking off";
    }
}
