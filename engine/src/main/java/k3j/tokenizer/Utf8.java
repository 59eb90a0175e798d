package k3j.tokenizer;

/**
 * UTF-8 as the tokenizer reads it. Text may hold bytes that are not well-formed UTF-8 (Unicode table 3-7: no
 * overlongs, no surrogates, nothing above U+10FFFF); each such byte is a unit of its own, carried through the
 * split pattern as the lone surrogate U+DC00+byte — a code point that is neither letter, number nor space, and
 * one that well-formed text can never contain — and mapped back to the very same byte for BPE.
 */
final class Utf8 {
    private Utf8() {}

    /** Text for the split pattern, and for each of its chars the offset of its first byte (plus one end entry). */
    record Decoded(String text, int[] byteAt) {}

    static Decoded decode(byte[] b, int from, int to) {
        StringBuilder sb = new StringBuilder(to - from);
        int[] at = new int[to - from + 1];
        int chars = 0;
        for (int i = from; i < to; ) {
            int len = wellFormed(b, i, to);
            if (len <= 0) {
                sb.append((char) (0xDC00 | (b[i] & 0xFF)));
                at[chars++] = i++;
                continue;
            }
            int cp = codePoint(b, i, len);
            if (cp >= 0x10000) {
                sb.append(Character.highSurrogate(cp)).append(Character.lowSurrogate(cp));
                at[chars++] = i;
                at[chars++] = i;   // the low half never starts a match: the pattern matches whole code points
            } else {
                sb.append((char) cp);
                at[chars++] = i;
            }
            i += len;
        }
        at[chars] = to;
        return new Decoded(sb.toString(), at);
    }

    /**
     * The length of the well-formed sequence starting at {@code i}; 0 when the byte at {@code i} cannot start
     * one; −1 when the bytes so far are a valid start cut off by {@code to} (more bytes could complete it).
     */
    static int wellFormed(byte[] b, int i, int to) {
        int c = b[i] & 0xFF;
        if (c < 0x80) return 1;
        int len, lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else return 0;
        for (int k = 1; k < len; k++) {
            if (i + k >= to) return -1;
            int d = b[i + k] & 0xFF;
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        }
        return len;
    }

    private static int codePoint(byte[] b, int i, int len) {
        int c = b[i] & 0xFF;
        if (len == 1) return c;
        int cp = c & (0x7F >> len);
        for (int k = 1; k < len; k++) cp = (cp << 6) | (b[i + k] & 0x3F);
        return cp;
    }
}
