package k3j.tokenizer;

/**
 * A token above the byte-level vocabulary, written literally in text. {@code special} is the file's flag
 * (kept for callers that skip specials when showing text); both kinds are recognised the same way when an
 * encode call allows added tokens.
 */
public record AddedToken(int id, String content, boolean special) {}
