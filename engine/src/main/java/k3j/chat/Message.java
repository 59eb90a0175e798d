package k3j.chat;

/** One chat message. {@code reasoning} is the assistant's thinking channel (null when there is none); other roles have none. */
public record Message(Role role, String content, String reasoning) {
    public Message {
        if (role == null || content == null) throw new IllegalArgumentException("a message needs a role and content");
        if (reasoning != null && role != Role.ASSISTANT) throw new IllegalArgumentException("only an assistant message has reasoning");
    }

    public static Message system(String content) {
        return new Message(Role.SYSTEM, content, null);
    }

    public static Message user(String content) {
        return new Message(Role.USER, content, null);
    }

    public static Message assistant(String content, String reasoning) {
        return new Message(Role.ASSISTANT, content, reasoning);
    }
}
