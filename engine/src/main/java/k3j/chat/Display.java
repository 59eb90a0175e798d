package k3j.chat;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.Utf8Stream;

/**
 * What a person sees of a reply as it is generated: its text, never split inside a UTF-8 character, without
 * the markup — {@code <|open|>tag<|sep|>} and {@code <|close|>tag<|sep|>} are hidden, the end of the thinking
 * becomes a blank line, other added tokens are hidden.
 */
public final class Display {
    private final Tokenizer tok;
    private final Xtml.Ids ids;
    private final Utf8Stream utf8 = new Utf8Stream();
    private final ByteArrayOutputStream tag = new ByteArrayOutputStream();
    private int marker = -1;   // the open/close whose tag is being read, or −1

    public Display(Xtml x) {
        this.tok = x.tokenizer();
        this.ids = x.ids();
    }

    /** The bytes to show for one more generated id (often none). */
    public byte[] token(int id) {
        if (id == ids.open() || id == ids.close()) {
            marker = id;
            tag.reset();
            return new byte[0];
        }
        if (marker >= 0) {
            if (id == ids.sep()) {
                boolean endOfThinking = marker == ids.close() && tag.toString(StandardCharsets.UTF_8).equals("think");
                marker = -1;
                return endOfThinking ? utf8.push("\n\n".getBytes(StandardCharsets.US_ASCII)) : new byte[0];
            }
            if (tok.added(id) == null) tag.writeBytes(tok.bytes(id));
            return new byte[0];
        }
        if (tok.added(id) != null) return new byte[0];
        return utf8.push(tok.bytes(id));
    }

    /** The end of the reply: whatever is held back. */
    public byte[] finish() {
        return utf8.finish();
    }
}
