package k3j.probe;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Deque;
import k3j.io.StrictJson;
import k3j.provider.ProviderResponse;
import org.junit.jupiter.api.Test;

/** Requests over real HTTP on loopback: 429/503 retried after Retry-After, errors named with status and message, the bounds kept, streams joined. */
class EndpointTest {
    /** A server answering each request with the next scripted status (200 when the script is done). */
    private static HttpServer server(Deque<Integer> script, String retryAfter) throws Exception {
        HttpServer s = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        s.createContext("/", x -> {
            try (x) {
                x.getRequestBody().readAllBytes();
                Integer st = script.poll();
                int status = st == null ? 200 : st;
                byte[] body = (status == 200 ? "{\"ok\":1}" : "{\"error\":{\"message\":\"busy " + status + "\"}}").getBytes(StandardCharsets.UTF_8);
                if (status != 200 && retryAfter != null) x.getResponseHeaders().set("Retry-After", retryAfter);
                x.sendResponseHeaders(status, body.length);
                x.getResponseBody().write(body);
            }
        });
        s.start();
        return s;
    }

    private static URI uri(HttpServer s) {
        return URI.create("http://127.0.0.1:" + s.getAddress().getPort());
    }

    @Test
    void retriesAfterRetryAfterThenAnswers() throws Exception {
        HttpServer s = server(new ArrayDeque<>(java.util.List.of(429, 503)), "0");
        try (Endpoint e = new Endpoint(uri(s), "k", Duration.ofSeconds(10), 2, 10)) {
            assertArrayEquals("{\"ok\":1}".getBytes(StandardCharsets.UTF_8), e.post("r1", Form.COMPLETIONS, StrictJson.MAPPER.createObjectNode()));
            assertEquals(3, e.sent());
            assertEquals(2, e.retried());
        } finally {
            s.stop(0);
        }
    }

    @Test
    void rateLimitedPastItsRetriesAndErrorsAreNamed() throws Exception {
        HttpServer s = server(new ArrayDeque<>(java.util.List.of(429, 429, 429, 500, 404)), "0");
        try (Endpoint e = new Endpoint(uri(s), null, Duration.ofSeconds(10), 2, 10)) {
            Endpoint.Failed a = assertThrows(Endpoint.Failed.class, () -> e.post("r1", Form.CHAT, StrictJson.MAPPER.createObjectNode()));
            assertTrue(a.getMessage().startsWith("r1 (POST http://127.0.0.1:") && a.getMessage().contains("/v1/chat/completions): HTTP 429: busy 429 (still after 2 retries)"), a.getMessage());
            Endpoint.Failed b = assertThrows(Endpoint.Failed.class, () -> e.post("r2", Form.CHAT, StrictJson.MAPPER.createObjectNode()));
            assertTrue(b.getMessage().contains("HTTP 500: busy 500") && !b.notServed, b.getMessage());
            Endpoint.Failed c = assertThrows(Endpoint.Failed.class, () -> e.post("r3", Form.CHAT, StrictJson.MAPPER.createObjectNode()));
            assertTrue(c.notServed, c.getMessage());
        } finally {
            s.stop(0);
        }
    }

    @Test
    void theRunsBoundOnRequestsHolds() throws Exception {
        HttpServer s = server(new ArrayDeque<>(), null);
        try (Endpoint e = new Endpoint(uri(s), null, Duration.ofSeconds(10), 0, 1)) {
            e.post("r1", Form.COMPLETIONS, StrictJson.MAPPER.createObjectNode());
            Endpoint.Failed f = assertThrows(Endpoint.Failed.class, () -> e.post("r2", Form.COMPLETIONS, StrictJson.MAPPER.createObjectNode()));
            assertTrue(f.getMessage().contains("past the run's bound of 1 requests"), f.getMessage());
        } finally {
            s.stop(0);
        }
    }

    @Test
    void aStreamIsJoinedAndOneWithoutItsEndIsRefused() {
        String ev = "data: {\"choices\":[{\"logprobs\":{\"tokens\":[\"a\"],\"token_logprobs\":[-0.5],\"top_logprobs\":[{\"a\":-0.5}]}}]}\n\n";
        byte[] whole = Asking.joined((ev + ev + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\ndata: [DONE]\n\n").getBytes(StandardCharsets.UTF_8), Form.COMPLETIONS, "s");
        ProviderResponse r = ProviderResponse.parse(whole, java.nio.file.Path.of("s"));
        assertEquals(2, r.tokens().size());
        assertEquals(3, r.promptTokens());
        String cut = assertThrows(ProviderResponse.RefusedException.class, () -> Asking.joined(ev.getBytes(StandardCharsets.UTF_8), Form.COMPLETIONS, "s")).getMessage();
        assertFalse(cut.isEmpty());
        assertTrue(cut.contains("without data: [DONE]"), cut);
    }
}
