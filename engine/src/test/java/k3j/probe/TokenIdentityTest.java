package k3j.probe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import k3j.provider.ProviderResponse;
import k3j.tokenizer.AddedToken;
import k3j.tokenizer.AddedTokens;
import k3j.tokenizer.Tokenizer;
import org.junit.jupiter.api.Test;

/** A token's id is vLLM's token_id:N, or the one id whose bytes it is; no id, two ids or an id past the vocabulary are refused by name. */
class TokenIdentityTest {
    /** Ranks a, b, ab; added tokens from id 3, the first of them "ab" again (two ids for the same bytes). */
    private static Tokenizer tok() {
        String[] toks = {"a", "b", "ab"};
        byte[][] ranks = new byte[toks.length][];
        for (int i = 0; i < toks.length; i++) ranks[i] = toks[i].getBytes(StandardCharsets.US_ASCII);
        AddedToken[] added = new AddedToken[AddedTokens.RESERVED];
        for (int i = 0; i < added.length; i++) added[i] = new AddedToken(toks.length + i, i == 0 ? "ab" : i == 1 ? "<x>" : "<|reserved_token_" + (toks.length + i) + "|>", true);
        return Tokenizer.of(ranks, added, "\\S+|\\s+");
    }

    private static ProviderResponse.Choice c(String text) {
        return new ProviderResponse.Choice(text.getBytes(StandardCharsets.UTF_8), -1);
    }

    @Test
    void vllmTokenIdsAndExactBytes() {
        assertEquals(7, TokenIdentity.id(c("token_id:7"), tok(), 300, "t"));
        assertEquals(7, TokenIdentity.id(c("token_id:7"), null, 300, "t"));   // no tokenizer needed
        assertEquals(1, TokenIdentity.id(c("b"), tok(), 300, "t"));
        assertEquals(4, TokenIdentity.id(c("<x>"), tok(), 300, "t"));
    }

    @Test
    void noIdTwoIdsOrPastTheVocabularyAreRefusedByName() {
        String two = assertThrows(ProviderResponse.RefusedException.class, () -> TokenIdentity.id(c("ab"), tok(), 300, "token 3")).getMessage();
        assertTrue(two.contains("token 3 'ab' is two tokens") && two.contains("id 2") && two.contains("3"), two);
        String none = assertThrows(ProviderResponse.RefusedException.class, () -> TokenIdentity.id(c("zz"), tok(), 300, "token 4")).getMessage();
        assertTrue(none.contains("token 4 'zz' is no token"), none);
        String past = assertThrows(ProviderResponse.RefusedException.class, () -> TokenIdentity.id(c("token_id:300"), tok(), 300, "token 5")).getMessage();
        assertTrue(past.contains("past the model's vocabulary of 300"), past);
        String noTok = assertThrows(ProviderResponse.RefusedException.class, () -> TokenIdentity.id(c("b"), null, 300, "token 6")).getMessage();
        assertTrue(noTok.contains("no tokenizer"), noTok);
    }
}
