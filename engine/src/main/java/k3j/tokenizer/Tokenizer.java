package k3j.tokenizer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Rank-based byte-level BPE (docs/semantics.md, "Tokenizer"): added tokens are cut out first (when the call
 * allows them; longest first at the earliest position), the rest is split by the pattern, and each piece is
 * either one token or merged from single bytes, always merging the adjacent pair whose concatenation has the
 * lowest rank (leftmost on ties) until no adjacent pair is a token. Ids 0..nBase−1 are the ranks, nBase..nBase+255
 * the added tokens. Decoding is byte-exact. Immutable and thread-safe.
 */
public final class Tokenizer {
    public static final String RANKS_FILE = "tiktoken.model", CONFIG_FILE = "tokenizer_config.json";

    private final ByteTable ranks;
    private final AddedToken[] added;
    private final byte[][] addedBytes;
    private final int[][] addedByFirstByte;   // first byte → added-token indices, longest content first
    private final Pattern split;   // null: Kimi's pattern, scanned by KimiSplitter

    private Tokenizer(byte[][] rankBytes, String source, AddedToken[] added, Pattern split) {
        try {
            this.ranks = new ByteTable(rankBytes);
        } catch (IllegalArgumentException e) {
            throw new TokenizerException(source + ": " + e.getMessage());
        }
        this.added = added.clone();
        this.split = split.pattern().equals(SplitPattern.compile(SplitPattern.KIMI).pattern()) ? null : split;
        addedBytes = new byte[added.length][];
        List<List<Integer>> first = new ArrayList<>();
        for (int b = 0; b < 256; b++) first.add(new ArrayList<>());
        for (int i = 0; i < added.length; i++) {
            if (added[i].id() != rankBytes.length + i) throw new IllegalArgumentException("added token " + i + " has id " + added[i].id());
            addedBytes[i] = added[i].content().getBytes(StandardCharsets.UTF_8);
            first.get(addedBytes[i][0] & 0xFF).add(i);
        }
        addedByFirstByte = new int[256][];
        for (int b = 0; b < 256; b++) {
            addedByFirstByte[b] = first.get(b).stream().sorted(Comparator.comparingInt((Integer i) -> -addedBytes[i].length))
                    .mapToInt(Integer::intValue).toArray();
        }
    }

    /** {@code dir/tiktoken.model} and {@code dir/tokenizer_config.json}, split with Kimi's pattern. */
    public static Tokenizer load(Path dir) {
        Path r = dir.resolve(RANKS_FILE), c = dir.resolve(CONFIG_FILE);
        if (!Files.exists(dir)) throw new TokenizerException(dir + ": no such folder (give --tok the folder holding " + RANKS_FILE + " and " + CONFIG_FILE + ")");
        if (!Files.isDirectory(dir)) throw new TokenizerException(dir + ": not a folder (give --tok the folder holding " + RANKS_FILE + " and " + CONFIG_FILE + ")");
        for (Path p : List.of(r, c)) if (!Files.exists(p)) throw new TokenizerException(p + ": missing (a tokenizer directory holds " + RANKS_FILE + " and " + CONFIG_FILE + ")");
        byte[][] rankBytes = Ranks.read(r);
        return new Tokenizer(rankBytes, r.toString(), AddedTokens.read(c, rankBytes.length), SplitPattern.compile(SplitPattern.KIMI));
    }

    /** A tokenizer from ranks already read, its added tokens (ids nBase..nBase+255 in order) and a tiktoken-style pattern. */
    public static Tokenizer of(byte[][] rankBytes, AddedToken[] added, String pattern) {
        if (added.length != AddedTokens.RESERVED) throw new IllegalArgumentException("need " + AddedTokens.RESERVED + " added tokens, got " + added.length);
        return new Tokenizer(rankBytes, "ranks", added, SplitPattern.compile(pattern));
    }

    /** Ranks in the byte-level vocabulary; the first added id. */
    public int nBase() {
        return ranks.size();
    }

    /** Every id this tokenizer knows: 0..size−1. */
    public int size() {
        return ranks.size() + added.length;
    }

    /** The added token with this content, if any. */
    public OptionalInt addedId(String content) {
        for (AddedToken t : added) if (t.content().equals(content)) return OptionalInt.of(t.id());
        return OptionalInt.empty();
    }

    /** The added token at {@code id}, or null for a rank. */
    public AddedToken added(int id) {
        return id >= nBase() && id < size() ? added[id - nBase()] : null;
    }

    public int[] encode(String text, boolean addedTokens) {
        return encode(text.getBytes(StandardCharsets.UTF_8), addedTokens);
    }

    /**
     * @param addedTokens true: added tokens written in the text are their ids (control text); false: every byte is
     *                    ordinary text (user text, so a typed {@code <|end_of_msg|>} cannot end a message)
     */
    public int[] encode(byte[] text, boolean addedTokens) {
        Ids out = new Ids(text.length / 3 + 4);
        int chunk = 0;
        if (addedTokens) {
            for (int i = 0; i < text.length; ) {
                int hit = addedAt(text, i);
                if (hit < 0) {
                    i++;
                    continue;
                }
                encodeOrdinary(text, chunk, i, out);
                out.add(added[hit].id());
                i += addedBytes[hit].length;
                chunk = i;
            }
        }
        encodeOrdinary(text, chunk, text.length, out);
        return out.toArray();
    }

    private int addedAt(byte[] text, int i) {
        for (int k : addedByFirstByte[text[i] & 0xFF]) {
            byte[] c = addedBytes[k];
            if (i + c.length <= text.length && Arrays.equals(c, 0, c.length, text, i, i + c.length)) return k;
        }
        return -1;
    }

    private void encodeOrdinary(byte[] b, int from, int to, Ids out) {
        if (from >= to) return;
        Utf8.Decoded d = Utf8.decode(b, from, to);
        if (split == null) {
            KimiSplitter.split(d.text(), (start, end) -> piece(b, d.byteAt()[start], d.byteAt()[end], out));
            return;
        }
        Matcher m = split.matcher(d.text());
        int end = 0;
        while (m.find()) {
            if (m.start() != end) throw gap(d, end);
            piece(b, d.byteAt()[m.start()], d.byteAt()[m.end()], out);
            end = m.end();
        }
        if (end != d.text().length()) throw gap(d, end);
    }

    private static IllegalStateException gap(Utf8.Decoded d, int at) {
        return new IllegalStateException("the split pattern matches nothing at byte " + d.byteAt()[at] + " (code point U+"
                + Integer.toHexString(d.text().codePointAt(at)).toUpperCase() + "): it must cover all text");
    }

    private void piece(byte[] b, int from, int to, Ids out) {
        int whole = ranks.rank(b, from, to);
        if (whole >= 0) {
            out.add(whole);
            return;
        }
        int n = to - from, m = n;
        int[] start = new int[n + 1], pair = new int[n];
        for (int i = 0; i <= n; i++) start[i] = from + i;
        for (int i = 0; i < n - 1; i++) pair[i] = rankOrMax(b, start[i], start[i + 2]);
        pair[n - 1] = Integer.MAX_VALUE;
        while (true) {
            int best = Integer.MAX_VALUE, at = -1;
            for (int i = 0; i < m - 1; i++) if (pair[i] < best) { best = pair[i]; at = i; }
            if (at < 0) break;
            System.arraycopy(start, at + 2, start, at + 1, m - at - 1);   // parts at and at+1 become one
            System.arraycopy(pair, at + 2, pair, at + 1, m - at - 2);
            m--;
            pair[at] = at + 1 < m ? rankOrMax(b, start[at], start[at + 2]) : Integer.MAX_VALUE;
            if (at > 0) pair[at - 1] = rankOrMax(b, start[at - 1], start[at + 1]);
        }
        for (int i = 0; i < m; i++) {
            int r = ranks.rank(b, start[i], start[i + 1]);
            if (r < 0) throw new TokenizerException(String.format("byte 0x%02X at offset %d has no token in this vocabulary", b[start[i]] & 0xFF, start[i]));
            out.add(r);
        }
    }

    private int rankOrMax(byte[] b, int from, int to) {
        int r = ranks.rank(b, from, to);
        return r < 0 ? Integer.MAX_VALUE : r;
    }

    /** The one id whose bytes are exactly {@code b} (a rank, else an added token's content), if any. */
    public OptionalInt id(byte[] b) {
        int r = b.length == 0 ? -1 : ranks.rank(b, 0, b.length);
        if (r >= 0) return OptionalInt.of(r);
        for (int i = 0; i < addedBytes.length; i++) if (Arrays.equals(addedBytes[i], b)) return OptionalInt.of(added[i].id());
        return OptionalInt.empty();
    }

    /** The bytes of one id: a rank's bytes, or an added token's content. */
    public byte[] bytes(int id) {
        if (id >= 0 && id < nBase()) return ranks.bytes(id);
        if (id >= nBase() && id < size()) return addedBytes[id - nBase()];
        throw new TokenizerException("id " + id + " is outside this tokenizer's " + size() + " ids");
    }

    /** The exact bytes the ids stand for (added tokens as their content). */
    public byte[] decode(int[] ids) {
        int n = 0;
        for (int id : ids) n += bytes(id).length;
        byte[] out = new byte[n];
        int at = 0;
        for (int id : ids) {
            byte[] b = bytes(id);
            System.arraycopy(b, 0, out, at, b.length);
            at += b.length;
        }
        return out;
    }

    /** A growable int list (the encoder's output). */
    private static final class Ids {
        private int[] a;
        private int n;

        Ids(int capacity) {
            a = new int[Math.max(capacity, 4)];
        }

        void add(int v) {
            if (n == a.length) a = Arrays.copyOf(a, n * 2);
            a[n++] = v;
        }

        int[] toArray() {
            return Arrays.copyOf(a, n);
        }
    }
}
