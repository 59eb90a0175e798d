package k3j.api;

/**
 * A chat turn or history refused: a turn past the model's positions ({@link #tooLong()}: bad input, the conversation
 * unchanged), a history that cannot continue, a tokenizer without the chat markers, or a reply that did not end.
 */
public final class ChatRefused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Whether the turn was refused by the position limit. */
    private final boolean tooLong;

    ChatRefused(k3j.chat.ChatException cause) {
        super(cause.getMessage(), cause);
        this.tooLong = cause instanceof k3j.chat.Conversation.TooLong;
    }

    /** {@return whether the turn was refused by the position limit, the conversation unchanged} */
    public boolean tooLong() {
        return tooLong;
    }
}
