package k3j.chat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import k3j.tokenizer.Tokenizer;

/**
 * Kimi K3's text chat format (docs/semantics.md §8.4). Elements are {@code <|open|>tag attrs<|sep|> … <|close|>tag<|sep|>}
 * and every message ends with {@code <|end_of_msg|>}; the markers are CONTROL segments, tags, attributes and
 * content TEXT segments, each encoded on its own.
 */
public final class Xtml {
    public static final String OPEN = "<|open|>", CLOSE = "<|close|>", SEP = "<|sep|>", EOM = "<|end_of_msg|>", EOS = "[EOS]";
    /** The announced effort, as the model's encoder words it. */
    static final String EFFORT_TEXT = "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
            + "supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=%s`.";

    /** The chat tokens' ids in one tokenizer. */
    public record Ids(int open, int close, int sep, int eom, int eos) {}

    private final Tokenizer tok;
    private final Ids ids;

    /**
     * Requires the four markers and [EOS], with {@code <|end_of_msg|>} and {@code [EOS]} at their K3 places
     * (n_base + 2 and n_base + 1): a tokenizer that differs is another model's.
     */
    public Xtml(Tokenizer tok) {
        this.tok = tok;
        int[] v = new int[5];
        String[] names = {OPEN, CLOSE, SEP, EOM, EOS};
        for (int i = 0; i < names.length; i++) {
            String n = names[i];
            v[i] = tok.addedId(n).orElseThrow(() -> new ChatException("the tokenizer has no " + n + " token: it cannot render K3 chat"));
        }
        ids = new Ids(v[0], v[1], v[2], v[3], v[4]);
        if (ids.eom() != tok.nBase() + 2 || ids.eos() != tok.nBase() + 1) {
            throw new ChatException("the tokenizer puts <|end_of_msg|> at " + ids.eom() + " and [EOS] at " + ids.eos() + ", K3 has them at n_base+2 = "
                    + (tok.nBase() + 2) + " and n_base+1 = " + (tok.nBase() + 1));
        }
    }

    public Ids ids() {
        return ids;
    }

    public Tokenizer tokenizer() {
        return tok;
    }

    /** The segments of a whole conversation, optionally followed by the assistant's generation prompt. */
    public List<Segment> render(List<Message> messages, Thinking thinking, boolean generationPrompt) {
        List<Segment> out = new ArrayList<>();
        if (thinking.on()) {
            open(out, "message", " role=\"system\" type=\"thinking-effort\"");
            out.add(new Segment.Text(String.format(EFFORT_TEXT, thinking.effort())));
            close(out, "message");
            out.add(new Segment.Control(EOM));
        }
        for (Message m : messages) message(out, m, thinking);
        if (generationPrompt) generationPrompt(out, thinking);
        return drop(out);
    }

    /** What follows a finished assistant turn: the next user message and the generation prompt. */
    public List<Segment> nextTurn(Message user, Thinking thinking) {
        List<Segment> out = new ArrayList<>();
        message(out, user, thinking);
        generationPrompt(out, thinking);
        return drop(out);
    }

    private static void message(List<Segment> out, Message m, Thinking thinking) {
        open(out, "message", " role=\"" + m.role().id() + "\"");
        if (m.role() == Role.ASSISTANT) {
            if (thinking.on()) {
                open(out, "think", "");
                out.add(new Segment.Text(m.reasoning() == null ? "" : m.reasoning()));
                close(out, "think");
            }
            open(out, "response", "");
            out.add(new Segment.Text(m.content()));
            close(out, "response");
        } else {
            out.add(new Segment.Text(m.content()));
        }
        close(out, "message");
        out.add(new Segment.Control(EOM));
    }

    private static void generationPrompt(List<Segment> out, Thinking thinking) {
        open(out, "message", " role=\"assistant\"");
        open(out, thinking.on() ? "think" : "response", "");
    }

    private static void open(List<Segment> out, String tag, String attrs) {
        out.add(new Segment.Control(OPEN));
        out.add(new Segment.Text(tag));
        out.add(new Segment.Text(attrs));
        out.add(new Segment.Control(SEP));
    }

    private static void close(List<Segment> out, String tag) {
        out.add(new Segment.Control(CLOSE));
        out.add(new Segment.Text(tag));
        out.add(new Segment.Control(SEP));
    }

    private static List<Segment> drop(List<Segment> s) {
        return s.stream().filter(x -> !x.text().isEmpty()).toList();
    }

    /** Each segment encoded on its own: CONTROL with added tokens, TEXT without. */
    public int[] encode(List<Segment> segments) {
        int[][] parts = new int[segments.size()][];
        for (int i = 0; i < parts.length; i++) parts[i] = tok.encode(segments.get(i).text(), segments.get(i) instanceof Segment.Control);
        return concat(parts);
    }

    /** The ids of a tag written as TEXT (without added tokens). */
    int[] tag(String name) {
        return tok.encode(name, false);
    }

    static int[] concat(int[]... parts) {
        int n = 0;
        for (int[] p : parts) n += p.length;
        int[] out = new int[n];
        int at = 0;
        for (int[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    static int find(int[] hay, int from, int[] needle) {
        for (int i = Math.max(0, from); i + needle.length <= hay.length; i++) {
            if (Arrays.equals(hay, i, i + needle.length, needle, 0, needle.length)) return i;
        }
        return -1;
    }
}
