package k3j.chat;

/**
 * One chat message. {@code reasoning} is the assistant's thinking channel (null when there is none); other roles have
 * none. {@code interrupted}: an assistant reply cut by a stop (SIGINT, SIGTERM, Ctrl-C) before it ended, kept as cut
 * (docs/formats.md §13).
 */
public record Message(Role role, String content, String reasoning, boolean interrupted) {
    public Message {
        if (role == null || content == null) throw new IllegalArgumentException("a message needs a role and content");
        if (reasoning != null && role != Role.ASSISTANT) throw new IllegalArgumentException("only an assistant message has reasoning");
        if (interrupted && role != Role.ASSISTANT) throw new IllegalArgumentException("only an assistant reply is interrupted");
    }

    /** A message that was not interrupted. */
    public Message(Role role, String content, String reasoning) {
        this(role, content, reasoning, false);
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
