package k3j.tokenizer;

/**
 * Kimi's split pattern ({@link SplitPattern#KIMI}) as a hand-written scanner: the same pieces as the regex (the
 * tokenizer gate checks them against it on every fixture and repository file, and a fuzz test on random text),
 * several times faster. At each position the first alternative that matches wins, and each alternative is
 * resolved the way a backtracking engine resolves it:
 * <ol>
 *   <li>H {@code [\p{Han}]+}: a run of Han.</li>
 *   <li>A {@code P? U* W+ C?} — P a char that is not CR, LF, letter or number; U upper-ish (Lu Lt Lm Lo M), W lower-ish
 *       (Ll Lm Lo M), both without Han; C a contraction. With the prefix first, then without: U* gives back
 *       chars until a W can follow, i.e. W+ starts at the last W within the U run (or right after it).</li>
 *   <li>B {@code P? U+ W* C?}: the whole U run, then the W run after it.</li>
 *   <li>C {@code \p{N}{1,3}}; D {@code ' '?[^\s\p{L}\p{N}]+[\r\n]*}.</li>
 *   <li>E {@code \s*[\r\n]+}: whitespace up to and including its last CR or LF; F {@code \s+(?!\S)}: a whitespace
 *       run, less its last char unless it ends the text (needs two chars otherwise); G {@code \s+}.</li>
 * </ol>
 */
final class KimiSplitter {
    private static final int HAN = 1, LETTER = 2, NUMBER = 4, SPACE = 8, UPPERISH = 16, LOWERISH = 32;
    private static final byte[] BMP = new byte[0x10000];

    static {
        for (int c = 0; c < BMP.length; c++) BMP[c] = (byte) compute(c);
    }

    private KimiSplitter() {}

    private static int compute(int c) {
        int type = Character.getType(c), f = 0;
        boolean han = Character.UnicodeScript.of(c) == Character.UnicodeScript.HAN;
        if (han) f |= HAN;
        boolean lu = type == Character.UPPERCASE_LETTER, ll = type == Character.LOWERCASE_LETTER, lt = type == Character.TITLECASE_LETTER,
                lm = type == Character.MODIFIER_LETTER, lo = type == Character.OTHER_LETTER;
        boolean mark = type == Character.NON_SPACING_MARK || type == Character.ENCLOSING_MARK || type == Character.COMBINING_SPACING_MARK;
        if (lu || ll || lt || lm || lo) f |= LETTER;
        if (type == Character.DECIMAL_DIGIT_NUMBER || type == Character.LETTER_NUMBER || type == Character.OTHER_NUMBER) f |= NUMBER;
        if (type == Character.SPACE_SEPARATOR || type == Character.LINE_SEPARATOR || type == Character.PARAGRAPH_SEPARATOR
                || (c >= 0x9 && c <= 0xD) || c == 0x85) f |= SPACE;   // Unicode White_Space
        if (!han && (lu || lt || lm || lo || mark)) f |= UPPERISH;
        if (!han && (ll || lm || lo || mark)) f |= LOWERISH;
        return f;
    }

    private static int flags(int c) {
        return c < 0x10000 ? BMP[c] : compute(c);
    }

    /** Told each piece as [start, end) char indices, in order, covering the text. */
    @FunctionalInterface
    interface Pieces {
        void piece(int start, int end);
    }

    static void split(String s, Pieces out) {
        int n = s.length();
        for (int i = 0; i < n; ) {
            int end = match(s, i, n);
            out.piece(i, end);
            i = end;
        }
    }

    private static int match(String s, int i, int n) {
        int c = s.codePointAt(i), f = flags(c), next = i + Character.charCount(c);
        if ((f & HAN) != 0) return run(s, i, n, HAN);
        boolean prefix = c != '\r' && c != '\n' && (f & (LETTER | NUMBER)) == 0;
        int m;
        if (prefix && (m = upperThenLower(s, next, n)) > 0) return m;
        if ((m = upperThenLower(s, i, n)) > 0) return m;
        if (prefix && (m = upperRun(s, next, n)) > 0) return m;
        if ((m = upperRun(s, i, n)) > 0) return m;
        if ((f & NUMBER) != 0) {
            int e = next;
            for (int k = 1; k < 3 && e < n && (flags(s.codePointAt(e)) & NUMBER) != 0; k++) e += Character.charCount(s.codePointAt(e));
            return e;
        }
        int d = c == ' ' && next < n && punct(s.codePointAt(next)) ? next : punct(c) ? i : -1;
        if (d >= 0) {
            int e = run(s, d, n, -1);
            while (e < n && (s.charAt(e) == '\r' || s.charAt(e) == '\n')) e++;
            return e;
        }
        // whitespace (every char left is one)
        int e = run(s, i, n, SPACE), lastBreak = -1;
        for (int k = i; k < e; k++) if (s.charAt(k) == '\r' || s.charAt(k) == '\n') lastBreak = k;
        if (lastBreak >= 0) return lastBreak + 1;                       // E
        if (e == n) return e;                                           // F at the end of the text
        int last = e - Character.charCount(s.codePointBefore(e));
        return last > i ? last : e;                                     // F, else G
    }

    /** Not whitespace, letter or number (the D class). */
    private static boolean punct(int c) {
        return (flags(c) & (SPACE | LETTER | NUMBER)) == 0;
    }

    /** End of the run of chars with {@code flag} from {@code i} (flag −1: the D class). */
    private static int run(String s, int i, int n, int flag) {
        int e = i;
        while (e < n) {
            int c = s.codePointAt(e);
            if (flag < 0 ? !punct(c) : (flags(c) & flag) == 0) break;
            e += Character.charCount(c);
        }
        return e;
    }

    /** A from {@code j} (after the optional prefix): U* then W+ then C?; the end, or −1. */
    private static int upperThenLower(String s, int j, int n) {
        int e = run(s, j, n, UPPERISH);
        int w = -1;
        if (e < n && (flags(s.codePointAt(e)) & LOWERISH) != 0) w = e;
        else {
            for (int k = e; k > j; ) {   // give back U chars until one can start W+
                k -= Character.charCount(s.codePointBefore(k));
                if ((flags(s.codePointAt(k)) & LOWERISH) != 0) {
                    w = k;
                    break;
                }
            }
        }
        if (w < 0) return -1;
        return contraction(s, run(s, w, n, LOWERISH), n);
    }

    /** B from {@code j}: U+ then W* then C?; the end, or −1. */
    private static int upperRun(String s, int j, int n) {
        if (j >= n) return -1;
        int e = run(s, j, n, UPPERISH);
        if (e == j) return -1;
        return contraction(s, run(s, e, n, LOWERISH), n);
    }

    /** After {@code at}, an optional {@code 's 't 're 've 'm 'll 'd} in any case (s also as ſ, U+017F). */
    private static int contraction(String s, int at, int n) {
        if (at + 1 >= n || s.charAt(at) != '\'') return at;
        char a = s.charAt(at + 1);
        char b = at + 2 < n ? s.charAt(at + 2) : 0;
        switch (Character.toLowerCase(a)) {
            case 's', 't', 'm', 'd', '\u017f' -> {
                return at + 2;
            }
            case 'r', 'v' -> {
                return b == 'e' || b == 'E' ? at + 3 : at;
            }
            case 'l' -> {
                return b == 'l' || b == 'L' ? at + 3 : at;
            }
            default -> {
                return at;
            }
        }
    }
}
