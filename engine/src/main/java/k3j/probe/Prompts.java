package k3j.probe;

import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.regex.Pattern;
import k3j.chat.ChatException;
import k3j.chat.Message;
import k3j.chat.Role;
import k3j.chat.Thinking;
import k3j.chat.Xtml;
import k3j.io.SafeFiles;
import k3j.tokenizer.Tokenizer;

/**
 * A probe's prompts: from a file (one a line: comma-separated ids, or text) or generated from a seed. Each has its
 * completions form (ids) and, when its bytes are UTF-8 text, its chat form (one user message, rendered with the
 * model's chat template, thinking off).
 */
public final class Prompts {
    /** At most this many prompts, and this many ids each. */
    public static final int MAX_PROMPTS = 1000, MAX_IDS = 32768;
    static final long MAX_FILE = 16L << 20;
    private static final Pattern IDS = Pattern.compile("\\s*\\d+(\\s*,\\s*\\d+)*\\s*");

    private Prompts() {}

    /** The prompts of {@code file}; blank lines are skipped. Ids outside the vocabulary, and too many prompts or ids, are refused. */
    public static List<Prompt> file(Path file, Tokenizer tok, int vocab) throws IOException {
        if (tok == null) throw new IllegalArgumentException("--prompts needs the model's tokenizer (--tok DIR) for text and the chat form");
        String all = new String(SafeFiles.readAll(file, MAX_FILE, "a prompts file"), StandardCharsets.UTF_8);
        List<Prompt> out = new ArrayList<>();
        String[] lines = all.split("\n");
        for (int n = 0; n < lines.length; n++) {
            String line = lines[n].endsWith("\r") ? lines[n].substring(0, lines[n].length() - 1) : lines[n];
            if (line.isBlank()) continue;
            if (out.size() == MAX_PROMPTS) throw new IllegalArgumentException(file + ": more than " + MAX_PROMPTS + " prompts");
            String name = "p" + (out.size() + 1);
            if (IDS.matcher(line).matches()) {
                String[] parts = line.split(",");
                if (parts.length > MAX_IDS) throw new IllegalArgumentException(file + " line " + (n + 1) + ": more than " + MAX_IDS + " ids");
                int[] ids = new int[parts.length];
                for (int i = 0; i < ids.length; i++) {
                    long id = Long.parseLong(parts[i].strip());
                    if (id >= vocab) throw new IllegalArgumentException(file + " line " + (n + 1) + ": id " + id + " is outside the model's vocabulary 0.." + (vocab - 1));
                    ids[i] = (int) id;
                }
                out.add(of(name, ids, tok));
            } else {
                int[] ids = tok.encode(line, false);
                if (ids.length > MAX_IDS) throw new IllegalArgumentException(file + " line " + (n + 1) + ": more than " + MAX_IDS + " ids");
                out.add(new Prompt(name, ids, line, chat(line, tok)));
            }
        }
        if (out.isEmpty()) throw new IllegalArgumentException(file + ": no prompt in it");
        return out;
    }

    /**
     * {@code n} prompts of {@code length} ids each, drawn from the seed among the tokens that are printable ASCII (so that
     * each is also text); without a tokenizer ({@code tok} null), among all {@code vocab} ids, with no chat form.
     */
    public static List<Prompt> random(int n, long seed, int length, Tokenizer tok, int vocab) {
        if (tok == null) {
            Random r = new Random(seed);
            List<Prompt> out = new ArrayList<>();
            for (int p = 0; p < n; p++) out.add(new Prompt("p" + (p + 1), r.ints(length, 0, vocab).toArray(), null, null));
            return out;
        }
        List<Integer> printable = new ArrayList<>();
        for (int id = 0; id < tok.nBase(); id++) {
            byte[] b = tok.bytes(id);
            boolean ok = b.length > 0;
            for (byte x : b) ok &= x >= 0x20 && x < 0x7f;
            if (ok) printable.add(id);
        }
        if (printable.isEmpty()) throw new IllegalArgumentException("the tokenizer has no printable token to make prompts of");
        Random r = new Random(seed);
        List<Prompt> out = new ArrayList<>();
        for (int p = 0; p < n; p++) {
            int[] ids = new int[length];
            for (int i = 0; i < length; i++) ids[i] = printable.get(r.nextInt(printable.size()));
            out.add(of("p" + (p + 1), ids, tok));
        }
        return out;
    }

    private static Prompt of(String name, int[] ids, Tokenizer tok) {
        String text = utf8(tok.decode(ids));
        return new Prompt(name, ids, text, text == null ? null : chat(text, tok));
    }

    /** {@return {@code b} as text when it is UTF-8, else null} */
    public static String utf8(byte[] b) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(java.nio.ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    /** {@code text} as one user message in the model's chat template, thinking off, ready for the assistant's reply. */
    static int[] chat(String text, Tokenizer tok) {
        try {
            Xtml x = new Xtml(tok);
            return x.encode(x.render(List.of(new Message(Role.USER, text, null)), Thinking.OFF, true));
        } catch (ChatException e) {
            throw new IllegalArgumentException("the chat form needs the model's chat template: " + e.getMessage());
        }
    }
}
