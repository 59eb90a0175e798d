package k3j.probe;

import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import k3j.provider.ProviderGrade;
import k3j.provider.ProviderResponse;
import k3j.tokenizer.AddedToken;
import k3j.tokenizer.Tokenizer;

/**
 * Which id each token of an answer is: vLLM's {@code token_id:N} (its {@code --return-tokens-as-token-ids}) as N;
 * otherwise the token's exact bytes (the chat form's {@code bytes}, or a completions token's text) mapped through the
 * model's tokenizer. Bytes that are no token of it, or that are both a rank and an added token of another id, are
 * refused by name: an id is never guessed.
 */
final class TokenIdentity {
    private static final Pattern TOKEN_ID = Pattern.compile("token_id:(\\d{1,9})");

    private TokenIdentity() {}

    /** The answer's tokens as ids (chosen and alternatives), with the answer's logprobs; {@code where} names the answer in refusals. */
    static ProviderGrade.Ids ids(ProviderResponse r, Tokenizer tok, int vocab, String where) {
        return ProviderGrade.ids(r, (c, what) -> id(c, tok, vocab, where + " " + what));
    }

    static int id(ProviderResponse.Choice c, Tokenizer tok, int vocab, String what) {
        Matcher m = TOKEN_ID.matcher(new String(c.bytes(), StandardCharsets.ISO_8859_1));
        int id;
        if (m.matches()) {
            id = Integer.parseInt(m.group(1));
        } else {
            if (tok == null) {
                throw new ProviderResponse.RefusedException(what + " " + c.shown() + ": the model has no tokenizer to map it through (give --tok DIR, or have the server "
                        + "name tokens as token_id:N)");
            }
            int rank = tok.id(c.bytes()).orElse(-1);
            int added = -1;
            for (int a = tok.nBase(); a < tok.size(); a++) {
                AddedToken t = tok.added(a);
                if (t != null && java.util.Arrays.equals(t.content().getBytes(StandardCharsets.UTF_8), c.bytes())) added = a;
            }
            if (rank >= 0 && added >= 0 && rank != added) {
                throw new ProviderResponse.RefusedException(what + " " + c.shown() + " is two tokens of the model's tokenizer (id " + rank + " and the added token "
                        + added + "): which one the server meant is not said; ask for vLLM's token_id:N or the chat form");
            }
            id = rank >= 0 ? rank : added;
            if (id < 0) throw new ProviderResponse.RefusedException(what + " " + c.shown() + " is no token of the model's tokenizer (the server's tokenizer differs, or the bytes were re-split)");
        }
        if (id >= vocab) throw new ProviderResponse.RefusedException(what + " " + c.shown() + " is id " + id + ", past the model's vocabulary of " + vocab);
        return id;
    }
}
