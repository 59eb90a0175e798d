package k3j.chat;

/**
 * A chat's thinking channel: on, with an effort the rendered system message announces ({@code low}, {@code high} or
 * {@code max}), or off. {@code medium} is refused: the model's own encoder rejects it although its prompt text lists
 * it. The one type of this concept: the API ({@code k3j.api.Engine#chat}) takes it as it is.
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
        if (effort == null) throw new IllegalArgumentException("a thinking effort is required (low, high or max)");
        if (!effort.equals("low") && !effort.equals("high") && !effort.equals("max")) {
            throw new IllegalArgumentException("thinking effort must be low, high or max, got '" + effort + "'"
                    + (effort.equals("medium") ? " (medium is listed in the model's prompt but its encoder refuses it)" : ""));
        }
    }

    /** One line: on with its effort, or off. */
    @Override
    public String toString() {
        return on ? "thinking on, effort " + effort : "thinking off";
    }
}
