package k3j.api;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import k3j.chat.Thinking;
import k3j.chat.Xtml;
import k3j.tokenizer.Tokenizer;

/**
 * What a server needs of a model's ids and text: the ids a request may name, text as ids and back, each id's
 * bytes, a chat rendered through the model's chat format (docs/semantics.md §8.4, as {@link Chat} renders its
 * first turn) and a reply split into its thinking and its response while it streams. A model without a tokenizer
 * serves ids alone.
 */
public final class ServedText {
    private final Tokenizer tokenizer;
    private final Xtml xtml;
    private final int vocabulary;
    private final int eos;

    private ServedText(Tokenizer tokenizer, int vocabulary) {
        this.tokenizer = tokenizer;
        this.vocabulary = vocabulary;
        Xtml x = null;
        if (tokenizer != null) {
            try {
                x = new Xtml(tokenizer);
            } catch (RuntimeException e) {
                x = null;   // a tokenizer without the chat markers: completions only
            }
        }
        this.xtml = x;
        this.eos = tokenizer == null ? -1 : tokenizer.addedId(Engine.EOS).orElse(-1);
    }

    /**
     * The text side of an opened engine.
     *
     * @param engine the engine
     * @return its ids and text
     */
    public static ServedText of(Engine engine) {
        return new ServedText(engine.tokenizer(), engine.shape().vocabSize());
    }

    /**
     * The tokenizer in {@code dir} (null: none) for a model of {@code vocabulary} ids, without opening the model.
     *
     * @param dir        the tokenizer's folder, or null
     * @param vocabulary the model's vocabulary
     * @return its ids and text
     */
    public static ServedText load(Path dir, int vocabulary) {
        if (vocabulary < 1) throw new IllegalArgumentException("a vocabulary of " + vocabulary + " ids");
        return new ServedText(dir != null && Files.isRegularFile(dir.resolve(Tokenizer.RANKS_FILE)) ? Tokenizer.load(dir) : null, vocabulary);
    }

    /** {@return the ids a request may name: 0 to this, exclusive} */
    public int vocabulary() {
        return vocabulary;
    }

    /** {@return whether text can be encoded and decoded} */
    public boolean hasTokenizer() {
        return tokenizer != null;
    }

    /** {@return whether a chat can be rendered (a tokenizer with the K3 chat markers)} */
    public boolean hasChat() {
        return xtml != null;
    }

    /** {@return the end-of-sequence id, or -1} */
    public int eos() {
        return eos;
    }

    /**
     * {@code text} as ids, added tokens recognised (as {@code k3 run --prompt}).
     *
     * @param text the text
     * @return its ids
     */
    public int[] encode(String text) {
        return need().encode(text.getBytes(StandardCharsets.UTF_8), true);
    }

    /**
     * The bytes one id stands for; empty for an id past the tokenizer (a model row no text names).
     *
     * @param id the id
     * @return its bytes
     */
    public byte[] bytes(int id) {
        Tokenizer t = need();
        return id >= 0 && id < t.size() ? t.bytes(id) : new byte[0];
    }

    /**
     * The ids' text, bytes that are not UTF-8 shown as U+FFFD.
     *
     * @param ids the ids
     * @return their text
     */
    public String text(int[] ids) {
        Tokenizer t = need();
        return new String(t.decode(Arrays.stream(ids).filter(id -> id >= 0 && id < t.size()).toArray()), StandardCharsets.UTF_8);
    }

    /**
     * The prompt of a chat: the messages rendered with the assistant's generation prompt after them.
     *
     * @param history  the messages (ending with a user message)
     * @param thinking the thinking channel
     * @return the ids to generate after
     */
    public int[] chatPrompt(History history, Thinking thinking) {
        return chat().encode(chat().render(history.chat().messages(), thinking, true));
    }

    /**
     * A reply as far as it has streamed.
     *
     * @param reasoning the thinking channel's text so far (empty with thinking off)
     * @param content   the response's text so far
     * @param ended     whether the reply has ended: the response closed, or an end of message or [EOS]
     */
    public record Split(String reasoning, String content, boolean ended) {}

    /**
     * The reply {@code generated} (the ids after the generation prompt) as far as it has streamed: with thinking on,
     * the reasoning runs to {@code <|close|>think<|sep|><|open|>response<|sep|>}; the response runs to the next
     * marker. Markers outside those places are left out of the text.
     *
     * @param generated the ids so far
     * @param thinking  the thinking channel the prompt was rendered with
     * @return the split
     */
    public Split split(int[] generated, Thinking thinking) {
        Xtml x = chat();
        Xtml.Ids m = x.ids();
        int body = 0, thinkEnd = 0;
        if (thinking.on()) {
            int[] toResponse = concat(new int[] {m.close()}, tag("think"), new int[] {m.sep(), m.open()}, tag("response"), new int[] {m.sep()});
            int at = find(generated, toResponse);
            if (at < 0) {
                int stop = firstMarker(generated, 0);
                return new Split(plain(generated, 0, stop < 0 ? generated.length : stop), "", stop >= 0 && ends(generated, stop));
            }
            thinkEnd = at;
            body = at + toResponse.length;
        }
        int stop = firstMarker(generated, body);
        String reasoning = thinking.on() ? plain(generated, 0, thinkEnd) : "";
        return new Split(reasoning, plain(generated, body, stop < 0 ? generated.length : stop), stop >= 0);
    }

    /** Whether the marker at {@code at} ends the reply here (anything but the start of the switch to the response). */
    private boolean ends(int[] ids, int at) {
        Xtml.Ids m = chat().ids();
        return ids[at] == m.eom() || ids[at] == m.eos();
    }

    /**
     * Whether {@code id} ends a chat reply by itself (the end of message or [EOS]).
     *
     * @param id the id
     * @return whether it ends the reply
     */
    public boolean endsTurn(int id) {
        if (xtml == null) return id == eos;
        return id == xtml.ids().eom() || id == xtml.ids().eos();
    }

    private int firstMarker(int[] ids, int from) {
        for (int i = from; i < ids.length; i++) if (tokenizer.added(ids[i]) != null && ids[i] < tokenizer.size()) return i;
        return -1;
    }

    private String plain(int[] ids, int from, int to) {
        return text(Arrays.copyOfRange(ids, from, to));
    }

    private int[] tag(String name) {
        return tokenizer.encode(name, false);
    }

    private static int find(int[] hay, int[] needle) {
        for (int i = 0; i + needle.length <= hay.length; i++) if (Arrays.equals(hay, i, i + needle.length, needle, 0, needle.length)) return i;
        return -1;
    }

    private static int[] concat(int[]... parts) {
        int[] out = new int[0];
        for (int[] p : parts) {
            int at = out.length;
            out = Arrays.copyOf(out, at + p.length);
            System.arraycopy(p, 0, out, at, p.length);
        }
        return out;
    }

    private Xtml chat() {
        if (xtml == null) throw new IllegalStateException(tokenizer == null ? "this model has no tokenizer: it serves ids alone" : "this tokenizer has no K3 chat markers");
        return xtml;
    }

    private Tokenizer need() {
        if (tokenizer == null) throw new IllegalStateException("this model has no tokenizer: it serves ids alone");
        return tokenizer;
    }
}
