package k3j.provider;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** A token's string against its bytes: vLLM's token_id:N names the id and is read as it is; any other string must be its bytes. */
class ProviderTokenBytesTest {
    private static ProviderResponse chat(String token, int b) {
        String entry = "{\"token\":\"" + token + "\",\"logprob\":-0.5,\"bytes\":[" + b + "],\"top_logprobs\":[{\"token\":\"" + token + "\",\"logprob\":-0.5,\"bytes\":[" + b + "]}]}";
        String body = "{\"choices\":[{\"logprobs\":{\"content\":[" + entry + "]}}]}";
        return ProviderResponse.parse(body.getBytes(StandardCharsets.UTF_8), Path.of("resp.json"));
    }

    @Test
    void aTokenIdStringIsNotRefusedForItsBytes() {
        assertEquals(1, chat("token_id:157", 157).tokens().size());
    }

    @Test
    void aPrintedTokenThatIsNotItsBytesIsRefused() {
        RuntimeException e = assertThrows(RuntimeException.class, () -> chat("Z", 63));
        assertTrue(e.getMessage().contains("contradicts itself"), e.getMessage());
        assertThrows(RuntimeException.class, () -> chat("token_id:abc", 157));
    }
}
