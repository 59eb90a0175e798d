package k3j.api;

import java.nio.file.Path;
import java.util.List;

/**
 * A conversation's messages in order: a system message first or none, then user and assistant turns alternating.
 * Read from and written to the JSONL history files of {@code k3 --chat --history} (docs/formats.md).
 *
 * @param messages the messages, oldest first
 */
public record History(List<Message> messages) {
    /** No message yet. */
    public static final History EMPTY = new History(List.of());

    /** Who speaks a message. */
    public enum Role {
        /** The system message that opens a conversation. */
        SYSTEM,
        /** The person chatting. */
        USER,
        /** The model. */
        ASSISTANT
    }

    /**
     * One message.
     *
     * @param role      who speaks it
     * @param content   its text
     * @param reasoning   an assistant's thinking channel; null when there is none (always for the other roles)
     * @param interrupted an assistant reply cut by a stop (SIGINT, SIGTERM, Ctrl-C) before it ended, kept as cut and
     *                    so marked in the history file (docs/formats.md); false for every other message
     */
    public record Message(Role role, String content, String reasoning, boolean interrupted) {
        /**
         * Checks the message by the chat's rules: a role, content, reasoning and the interrupted mark only for an assistant.
         */
        public Message {
            chat(role, content, reasoning, interrupted);   // the chat's own checks, with its messages
        }

        /**
         * A message that was not interrupted.
         *
         * @param role      who speaks it
         * @param content   its text
         * @param reasoning an assistant's thinking channel, or null
         */
        public Message(Role role, String content, String reasoning) {
            this(role, content, reasoning, false);
        }

        /**
         * A system message.
         *
         * @param content its text
         * @return the message
         */
        public static Message system(String content) {
            return new Message(Role.SYSTEM, content, null);
        }

        /**
         * A user message.
         *
         * @param content its text
         * @return the message
         */
        public static Message user(String content) {
            return new Message(Role.USER, content, null);
        }

        /**
         * An assistant message.
         *
         * @param content its text
         * @param reasoning its thinking channel, or null
         * @return the message
         */
        public static Message assistant(String content, String reasoning) {
            return new Message(Role.ASSISTANT, content, reasoning);
        }

        private static k3j.chat.Message chat(Role role, String content, String reasoning, boolean interrupted) {
            if (role == null) throw new IllegalArgumentException("a message needs a role and content");
            return new k3j.chat.Message(k3j.chat.Role.valueOf(role.name()), content, reasoning, interrupted);
        }

        static Message of(k3j.chat.Message m) {
            return new Message(Role.valueOf(m.role().name()), m.content(), m.reasoning(), m.interrupted());
        }

        /**
         * One line: the role and the content, shortened.
         */
        @Override
        public String toString() {
            String shown = content.length() > 60 ? content.substring(0, 57) + "..." : content;
            return role.name().toLowerCase(java.util.Locale.ROOT) + ": " + shown;
        }
    }

    /**
     * Checks the order: a system message first or none, then user and assistant turns alternating.
     */
    public History {
        messages = List.copyOf(messages);
        chat(messages);   // the order rules, with the chat's messages
    }

    /**
     * A history of {@code messages}.
     *
     * @param messages the messages, oldest first
     * @return the history
     */
    public static History of(Message... messages) {
        return new History(List.of(messages));
    }

    /**
     * The history file {@code file} (refused by line when malformed).
     *
     * @param file a JSONL history file
     * @return its history
     */
    public static History read(Path file) {
        return of(k3j.chat.Transcript.read(file));
    }

    /**
     * Writes this history to {@code file}, whole or not at all.
     *
     * @param file the history file to write
     */
    public void save(Path file) {
        chat().save(file);
    }

    /**
     * This history and {@code m} after it.
     *
     * @param m the next message
     * @return a new history; this one is unchanged
     */
    public History with(Message m) {
        List<Message> all = new java.util.ArrayList<>(messages);
        all.add(m);
        return new History(all);
    }

    /**
     * {@return the number of messages}
     */
    public int size() {
        return messages.size();
    }

    k3j.chat.Transcript chat() {
        return chat(messages);
    }

    private static k3j.chat.Transcript chat(List<Message> messages) {
        k3j.chat.Transcript h = new k3j.chat.Transcript();
        for (Message m : messages) h.add(Message.chat(m.role(), m.content(), m.reasoning(), m.interrupted()));
        return h;
    }

    static History of(k3j.chat.Transcript h) {
        return new History(h.messages().stream().map(Message::of).toList());
    }

    /** One line: the number of messages. */
    @Override
    public String toString() {
        return "History[" + messages.size() + " message(s)]";
    }
}
