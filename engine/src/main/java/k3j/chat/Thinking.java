package k3j.chat;

/**
 * The thinking channel: on (with an effort the rendered system message announces) or off. {@code medium} is
 * refused: the model's own encoder rejects it although its prompt text lists it.
 */
public record Thinking(boolean on, String effort) {
    public static final Thinking DEFAULT = new Thinking(true, "max");
    public static final Thinking OFF = new Thinking(false, "max");

    public Thinking {
        if (!effort.equals("low") && !effort.equals("high") && !effort.equals("max")) {
            throw new IllegalArgumentException("thinking effort must be low, high or max, got '" + effort + "'"
                    + (effort.equals("medium") ? " (medium is listed in the model's prompt but its encoder refuses it)" : ""));
        }
    }
}
