package k3j.chat;

/** A history file, history or generated turn that breaks the chat rules; the message says where and why. */
public class ChatException extends RuntimeException {
    public ChatException(String message) {
        super(message);
    }

    public ChatException(String message, Throwable cause) {
        super(message, cause);
    }
}
