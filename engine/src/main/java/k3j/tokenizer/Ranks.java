package k3j.tokenizer;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;

/**
 * A {@code tiktoken.model} file: one {@code base64(token bytes) SP rank} per line (docs/formats.md). The ranks
 * are the token ids and must be exactly 0..n−1, each once; every token is 1..{@value #MAX_TOKEN_BYTES} bytes and
 * no two share bytes. A trailing CR is stripped and blank lines are skipped. Anything else is refused with
 * {@code name:line: reason}.
 */
public final class Ranks {
    public static final int MAX_TOKEN_BYTES = 512;
    /** More ranks than this is not a vocabulary but a corrupt file. */
    public static final int MAX_RANKS = 1 << 22;
    /** A tiktoken.model larger than this is not a vocabulary (Kimi's is 2.5 MB): refused unread. */
    static final long MAX_FILE = 256L << 20;

    private Ranks() {}

    public static byte[][] read(Path file) {
        byte[] all;
        try {
            all = k3j.io.SafeFiles.readAll(file, MAX_FILE, "a tiktoken.model");
        } catch (IOException e) {
            throw new TokenizerException(k3j.io.SafeFiles.why(e), e);
        }
        return read(all, file.toString());
    }

    /** @param name how errors name the source */
    public static byte[][] read(InputStream in, String name) throws IOException {
        return read(k3j.io.SafeFiles.readAll(in, MAX_FILE, name), name);
    }

    static byte[][] read(byte[] all, String name) {
        byte[][] byRank = new byte[1024][];
        int count = 0, maxRank = -1, line = 0;
        Base64.Decoder b64 = Base64.getDecoder();
        for (int at = 0; at < all.length; ) {
            int eol = at;
            while (eol < all.length && all[eol] != '\n') eol++;
            line++;
            int end = eol > at && all[eol - 1] == '\r' ? eol - 1 : eol;
            int from = at;
            at = eol + 1;
            if (end == from) continue;
            String text = new String(all, from, end - from, StandardCharsets.ISO_8859_1);
            int sp = text.indexOf(' ');
            if (sp < 0) throw bad(name, line, "no space between the base64 token and its rank");
            if (text.indexOf(' ', sp + 1) >= 0) throw bad(name, line, "more than one space");
            byte[] token;
            try {
                token = b64.decode(text.substring(0, sp));
            } catch (IllegalArgumentException e) {
                throw bad(name, line, "bad base64 '" + clip(text.substring(0, sp)) + "'");
            }
            if (token.length == 0) throw bad(name, line, "empty token");
            if (token.length > MAX_TOKEN_BYTES) throw bad(name, line, "token of " + token.length + " bytes, at most " + MAX_TOKEN_BYTES);
            int rank;
            try {
                rank = Integer.parseInt(text.substring(sp + 1));
            } catch (NumberFormatException e) {
                throw bad(name, line, "rank '" + clip(text.substring(sp + 1)) + "' is not a decimal integer");
            }
            if (rank < 0 || rank >= MAX_RANKS) throw bad(name, line, "rank " + rank + " outside [0, " + MAX_RANKS + ")");
            if (rank >= byRank.length) byRank = java.util.Arrays.copyOf(byRank, Math.max(rank + 1, byRank.length * 2));
            if (byRank[rank] != null) throw bad(name, line, "rank " + rank + " given twice");
            byRank[rank] = token;
            count++;
            maxRank = Math.max(maxRank, rank);
        }
        if (count == 0) throw new TokenizerException(name + ": no tokens (empty file)");
        for (int r = 0; r <= maxRank; r++) {
            if (byRank[r] == null) throw new TokenizerException(name + ": rank " + r + " is missing (ranks must be 0.." + maxRank + ", each once)");
        }
        return java.util.Arrays.copyOf(byRank, maxRank + 1);
    }

    private static TokenizerException bad(String name, int line, String reason) {
        return new TokenizerException(name + ":" + line + ": " + reason);
    }

    private static String clip(String s) {
        return s.length() > 40 ? s.substring(0, 40) + "…" : s;
    }
}
