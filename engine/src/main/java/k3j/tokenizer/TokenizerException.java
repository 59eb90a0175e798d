package k3j.tokenizer;

/** A tokenizer file this reader refuses, or a request it cannot honour; the message names the file and line. */
public final class TokenizerException extends RuntimeException {
    public TokenizerException(String message) {
        super(message);
    }

    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
