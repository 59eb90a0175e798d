package k3j.api;

import k3j.chat.Conversation;

/**
 * One assistant turn of a {@link Chat}.
 *
 * @param fed            the ids fed to the model for this turn (what followed the previous reply)
 * @param generated      the ids generated, the end-of-message marker included when the reply ended
 * @param ended          whether the reply ended by itself (end of message or [EOS]) rather than at the limit or a cancel
 * @param message        the assistant's message as the history keeps it
 * @param problem        why the ids are not a well-formed assistant turn, or null when they are (the history keeps the text either way)
 * @param prefillSeconds the seconds spent feeding {@code fed}
 * @param decodeSeconds  the seconds spent generating
 */
public record Reply(int[] fed, int[] generated, boolean ended, History.Message message, String problem, double prefillSeconds, double decodeSeconds) {
    /** Keeps copies of the id arrays. */
    public Reply {
        fed = fed.clone();
        generated = generated.clone();
    }

    /** {@return the ids fed for this turn (a copy)} */
    @Override
    public int[] fed() {
        return fed.clone();
    }

    /** {@return the ids generated (a copy)} */
    @Override
    public int[] generated() {
        return generated.clone();
    }

    static Reply of(Conversation.Reply r) {
        k3j.chat.Message m = r.message();
        return new Reply(r.fed(), r.generated(), r.ended(), m == null ? null : History.Message.of(m),
                r.problem(), r.prefillSeconds(), r.decodeSeconds());
    }

    /** One line: the ids fed and generated, how it ended, and the text (shortened). */
    @Override
    public String toString() {
        return "Reply[" + fed.length + " id(s) fed, " + generated.length + " generated, " + (ended ? "ended" : "cut") + (problem != null ? ", malformed" : "")
                + (message != null ? ", " + message : "") + "]";
    }
}
