package k3j.probe;

import java.util.Locale;

/** The two request forms of an OpenAI-compatible endpoint. */
public enum Form {
    /** {@code /v1/completions}: the prompt as token ids, tokens printed as text (or vLLM's {@code token_id:N}). */
    COMPLETIONS("/v1/completions"),
    /** {@code /v1/chat/completions}: a user message through the server's chat template, tokens with their exact {@code bytes}. */
    CHAT("/v1/chat/completions");

    /** The endpoint's path under the server's root. */
    public final String path;

    Form(String path) {
        this.path = path;
    }

    /** {@return "completions" or "chat", as {@code --forms} names it} */
    public String word() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The form {@code --forms} names {@code word}. */
    public static Form of(String word) {
        for (Form f : values()) if (f.word().equals(word.strip())) return f;
        throw new IllegalArgumentException("no form '" + word.strip() + "': the forms are completions and chat");
    }
}
