package k3j.cli;

import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.Utf8Stream;

/**
 * A generation's output on stdout as it is made, flushed token by token: the text with a tokenizer (a character
 * split across tokens is held until it is whole; the end-of-sequence token is not shown; ids past the
 * tokenizer's table are dropped, as in the final text), else the ids separated by ','. {@link #end} closes the
 * line; what was printed is then exactly the final text or ids, and a newline.
 */
final class Streamed {
    private final PrintWriter out;
    private final Tokenizer tokenizer;
    private final int eos;
    private final Utf8Stream utf8 = new Utf8Stream();
    private boolean any;

    /** {@code eos}: the id that ends the generation (not shown), or -1. */
    Streamed(PrintWriter out, Tokenizer tokenizer, int eos) {
        this.out = out;
        this.tokenizer = tokenizer;
        this.eos = eos;
    }

    void token(int id) {
        if (tokenizer == null) out.print((any ? "," : "") + id);
        else if (id != eos && id < tokenizer.size()) out.print(new String(utf8.push(tokenizer.bytes(id)), StandardCharsets.UTF_8));
        any = true;
        out.flush();
    }

    /** Ends the line, when a token was told. */
    void end() {
        if (!any) return;
        if (tokenizer != null) out.print(new String(utf8.finish(), StandardCharsets.UTF_8));
        out.println();
        out.flush();
    }
}
