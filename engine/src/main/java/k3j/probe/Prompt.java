package k3j.probe;

/**
 * One prompt of a probe, in both forms.
 *
 * @param name    how results name it ({@code p1}, {@code p2}, ...)
 * @param ids     the completions form's prompt ids
 * @param text    the chat form's user message, or null when the prompt has no text (ids that are not UTF-8)
 * @param chatIds the chat form's prompt as ids: the message rendered with the model's chat template (null without text)
 */
public record Prompt(String name, int[] ids, String text, int[] chatIds) {
    public Prompt {
        if (ids.length == 0) throw new IllegalArgumentException(name + ": an empty prompt");
        ids = ids.clone();
        chatIds = chatIds == null ? null : chatIds.clone();
    }

    /** {@return the prompt ids the server must count for {@code form}} */
    public int[] ids(Form form) {
        return form == Form.CHAT ? chatIds : ids;
    }
}
