package k3j.tokenizer;

import java.util.regex.Pattern;

/**
 * The pre-tokenisation regex. Patterns are written as tiktoken's regex engine reads them; two of its readings
 * differ from java.util.regex and are translated here: {@code \p{Han}} is {@code \p{IsHan}} (the Han script);
 * {@code $} is the very end of the text ({@code \z}), where Java's would also match before a final line break;
 * and {@code \s} is Unicode White_Space, not ASCII, which {@link Pattern#UNICODE_CHARACTER_CLASS} gives (it
 * also makes {@code (?i)} fold case the Unicode way, as tiktoken's does).
 */
public final class SplitPattern {
    /**
     * Kimi's {@code pat_str}: o200k's pattern with Han split out as its own alternative and masked out of the
     * letter classes, and without {@code /} in the punctuation rule's tail (docs/semantics.md).
     */
    public static final String KIMI = String.join("|",
            "[\\p{Han}]+",
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}&&[^\\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "\\p{N}{1,3}",
            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*",
            "\\s*[\\r\\n]+",
            "\\s+(?!\\S)",
            "\\s+");

    private SplitPattern() {}

    /** A tiktoken-style pattern as a Java pattern that splits text the same way. */
    public static Pattern compile(String tiktokenPattern) {
        return Pattern.compile(translate(tiktokenPattern), Pattern.UNICODE_CHARACTER_CLASS);
    }

    static String translate(String p) {
        StringBuilder sb = new StringBuilder(p.length() + 16);
        int classDepth = 0;
        for (int i = 0; i < p.length(); i++) {
            char c = p.charAt(i);
            if (c == '\\' && i + 1 < p.length()) {
                if (p.startsWith("\\p{Han}", i)) {
                    sb.append("\\p{IsHan}");
                    i += "\\p{Han}".length() - 1;
                } else {
                    sb.append(c).append(p.charAt(++i));
                }
                continue;
            }
            if (c == '[') classDepth++;
            else if (c == ']' && classDepth > 0) classDepth--;
            sb.append(c == '$' && classDepth == 0 ? "\\z" : String.valueOf(c));
        }
        return sb.toString();
    }
}
