package k3j.serve;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import k3j.Repo;
import k3j.api.ServedText;
import k3j.api.Serving;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The HTTP layer of k3 serve over real HTTP on loopback (java.net.http), with a scripted batch in place of the
 * engine and tiny-k3's real tokenizer: every refusal is an OpenAI error object with its status and the field it
 * names, a full queue is 429 with Retry-After, a batch that can never take a request is 503, a stop string
 * cuts the text and cancels the sequence, a stream ends with {@code data: [DONE]}, a drained server refuses with 503,
 * a generation past the request timeout is 504 and cancelled.
 */
class ServerAnswersLikeOpenAiTest {
    /** A batch that answers each sequence on its own thread with ids 65, 66, 67, ... (A, B, C, ...), each logprob -0.5. */
    static final class Scripted implements Serving {
        final AtomicInteger refuseRetryable = new AtomicInteger(), refuseNever = new AtomicInteger();
        final ConcurrentLinkedQueue<AtomicBoolean> cancelled = new ConcurrentLinkedQueue<>();
        final List<Request> seen = new ArrayList<>();
        volatile boolean drained;

        @Override
        public Ticket submit(Request r, Sink sink) {
            if (drained) throw new Rejected("drained", true);
            if (refuseRetryable.getAndUpdate(n -> Math.max(0, n - 1)) > 0) throw new Rejected("the queue is full", true);
            if (refuseNever.getAndUpdate(n -> Math.max(0, n - 1)) > 0) throw new Rejected("it can never fit the plan", false);
            synchronized (seen) {
                seen.add(r);
            }
            AtomicBoolean stop = new AtomicBoolean();
            cancelled.add(stop);
            Thread.ofVirtual().start(() -> {
                if (r.promptLogprobs()) {
                    List<TokenLogprob> p = new ArrayList<>();
                    for (int i = 1; i < r.prompt().length; i++) p.add(new TokenLogprob(r.prompt()[i], -1f, new int[] {r.prompt()[i]}, new float[] {-1f}));
                    sink.prompt(p);
                }
                for (int i = 0; i < r.maxTokens(); i++) {
                    if (stop.get()) {
                        sink.finished(Finish.CANCELLED, null);
                        return;
                    }
                    int id = 65 + i % 26;
                    sink.token(i, new TokenLogprob(id, -0.5f, new int[] {id, 66}, new float[] {-0.5f, -2f}));
                    try {
                        Thread.sleep(2);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
                sink.finished(Finish.LENGTH, null);
            });
            return () -> stop.set(true);
        }

        @Override
        public Stats stats() {
            return new Stats(0, 0, 0, 0, 0, 0, 0);
        }

        @Override
        public void drain() {
            drained = true;
        }

        @Override
        public void close() {}
    }

    /** One request and what must come back: the status, and the error's param and code (null: not judged). */
    record Case(String what, String path, String body, int status, String param, String code) {}

    static final String KEY = "test-key";
    static Scripted batch;
    static Server server;
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    @BeforeAll
    static void start() {
        batch = new Scripted();
        ServedText text = ServedText.load(Repo.path("oracle-fixtures/tiny-k3"), 256);
        server = Server.start(batch, text, new Server.Settings("127.0.0.1", 0, "tiny-k3", KEY, 4096, Duration.ofSeconds(5), Duration.ofSeconds(30), 128, false));
    }

    @AfterAll
    static void stop() {
        server.close();
    }

    static HttpResponse<String> post(String path, String body, String key) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(server.address() + path)).timeout(Duration.ofSeconds(30))
                .POST(HttpRequest.BodyPublishers.ofString(body)).header("Content-Type", "application/json");
        if (key != null) b.header("Authorization", "Bearer " + key);
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static final List<Case> REFUSALS = List.of(
            new Case("malformed JSON", "/v1/completions", "{\"prompt\": [1,", 400, null, "invalid_json"),
            new Case("trailing tokens", "/v1/completions", "{\"prompt\": [1]} 7", 400, null, "invalid_json"),
            new Case("a duplicate field", "/v1/completions", "{\"prompt\": [1], \"prompt\": [2]}", 400, null, "invalid_json"),
            new Case("not an object", "/v1/completions", "[1]", 400, null, "invalid_json"),
            new Case("over the body limit", "/v1/completions", "{\"prompt\": \"" + "x".repeat(5000) + "\"}", 413, null, "request_too_large"),
            new Case("an unknown field", "/v1/completions", "{\"prompt\": [1], \"best_of\": 2}", 400, "best_of", null),
            new Case("max_tokens 0", "/v1/completions", "{\"prompt\": [1], \"max_tokens\": 0}", 400, "max_tokens", null),
            new Case("max_tokens not an integer", "/v1/completions", "{\"prompt\": [1], \"max_tokens\": 1.5}", 400, "max_tokens", null),
            new Case("a token id past the vocabulary", "/v1/completions", "{\"prompt\": [1, 256]}", 400, "prompt", "invalid_token_id"),
            new Case("a negative token id", "/v1/completions", "{\"prompt\": [-3]}", 400, "prompt", "invalid_token_id"),
            new Case("a token id past int", "/v1/completions", "{\"prompt\": [99999999999]}", 400, "prompt", null),
            new Case("a prompt over the context", "/v1/completions", "{\"prompt\": [" + "1,".repeat(130) + "1]}", 400, "prompt", "context_length_exceeded"),
            new Case("prompt and max_tokens over the context", "/v1/completions", "{\"prompt\": [1, 2], \"max_tokens\": 127}", 400, "prompt", "context_length_exceeded"),
            new Case("an empty prompt", "/v1/completions", "{\"prompt\": []}", 400, "prompt", null),
            new Case("a batch of prompts", "/v1/completions", "{\"prompt\": [\"a\", \"b\"]}", 400, "prompt", null),
            new Case("n 2", "/v1/completions", "{\"prompt\": [1], \"n\": 2}", 400, "n", null),
            new Case("logprobs 21", "/v1/completions", "{\"prompt\": [1], \"logprobs\": 21}", 400, "logprobs", null),
            new Case("top_p 0", "/v1/completions", "{\"prompt\": [1], \"top_p\": 0}", 400, "top_p", null),
            new Case("temperature -1", "/v1/completions", "{\"prompt\": [1], \"temperature\": -1}", 400, "temperature", null),
            new Case("a penalty", "/v1/completions", "{\"prompt\": [1], \"presence_penalty\": 1}", 400, "presence_penalty", null),
            new Case("stream_options without stream", "/v1/completions", "{\"prompt\": [1], \"stream_options\": {\"include_usage\": true}}", 400, "stream_options", null),
            new Case("another model", "/v1/completions", "{\"model\": \"gpt-4\", \"prompt\": [1]}", 404, "model", "model_not_found"),
            new Case("top_logprobs without logprobs", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", 400, "top_logprobs", null),
            new Case("top_logprobs 21", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true, \"top_logprobs\": 21}", 400, "top_logprobs", null),
            new Case("a chat ending with the assistant", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"assistant\", \"content\": \"y\"}]}", 400, "messages", null),
            new Case("a message without content", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\"}]}", 400, "messages[0].content", null),
            new Case("an unknown role", "/v1/chat/completions", "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", 400, "messages[0].role", null),
            new Case("an unknown reasoning effort", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_effort\": \"huge\"}", 400, "reasoning_effort", null),
            new Case("no such endpoint", "/v1/embeddings", "{}", 404, null, "not_found"));

    @Test
    void everyRefusalIsAnOpenAiErrorWithItsStatusAndField() throws Exception {
        int before;
        synchronized (batch.seen) {
            before = batch.seen.size();
        }
        for (Case c : REFUSALS) {
            HttpResponse<String> r = post(c.path(), c.body(), KEY);
            assertEquals(c.status(), r.statusCode(), c.what() + ": " + r.body());
            JsonNode e = Requests.JSON.readTree(r.body()).get("error");
            assertTrue(e != null && e.get("message").isTextual() && e.get("type").isTextual() && e.has("param") && e.has("code"), c.what() + ": " + r.body());
            if (c.param() != null) assertEquals(c.param(), e.get("param").asText(), c.what());
            if (c.code() != null) assertEquals(c.code(), e.get("code").asText(), c.what());
        }
        synchronized (batch.seen) {
            assertEquals(before, batch.seen.size(), "a refused request reached the batch");
        }
    }

    @Test
    void aMissingOrWrongKeyIs401AndHealthNeedsNone() throws Exception {
        assertEquals(401, post("/v1/completions", "{\"prompt\": [1]}", null).statusCode());
        assertEquals(401, post("/v1/completions", "{\"prompt\": [1]}", KEY + "x").statusCode());
        assertEquals(401, post("/v1/completions", "{\"prompt\": [1]}", KEY.substring(1)).statusCode());
        HttpResponse<String> h = HTTP.send(HttpRequest.newBuilder(URI.create(server.address() + "/health")).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, h.statusCode());
    }

    @Test
    void aFullQueueIs429WithRetryAfterAndARequestThatNeverFitsIs503() throws Exception {
        batch.refuseRetryable.set(1);
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": [1], \"max_tokens\": 2}", KEY);
        assertEquals(429, r.statusCode(), r.body());
        assertTrue(Integer.parseInt(r.headers().firstValue("Retry-After").orElseThrow()) > 0);
        batch.refuseNever.set(1);
        r = post("/v1/completions", "{\"prompt\": [1], \"max_tokens\": 2}", KEY);
        assertEquals(503, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("Retry-After").isPresent());
    }

    @Test
    void aStopStringCutsTheTextAndCancelsTheSequence() throws Exception {
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 20, \"stop\": [\"DE\"], \"logprobs\": 1}", KEY);
        assertEquals(200, r.statusCode(), r.body());
        JsonNode c = Requests.JSON.readTree(r.body()).get("choices").get(0);
        assertEquals("ABC", c.get("text").asText());
        assertEquals("stop", c.get("finish_reason").asText());
        assertEquals(-0.5f, c.get("logprobs").get("token_logprobs").get(0).floatValue());
        AtomicBoolean last = null;
        for (AtomicBoolean b : batch.cancelled) last = b;
        assertTrue(last != null && last.get(), "the stop string did not cancel the sequence");
    }

    @Test
    void aStreamSendsEachIdAndEndsWithDone() throws Exception {
        HttpResponse<String> r = post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 3, \"stream\": true, "
                + "\"logprobs\": true, \"top_logprobs\": 1, \"stream_options\": {\"include_usage\": true}}", KEY);
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.headers().firstValue("Content-Type").orElseThrow().startsWith("text/event-stream"));
        String[] events = r.body().split("\n\n");
        assertEquals("data: [DONE]", events[events.length - 1].strip());
        StringBuilder text = new StringBuilder();
        for (String e : events) {
            if (e.strip().equals("data: [DONE]")) continue;
            JsonNode j = Requests.JSON.readTree(e.strip().substring("data: ".length()));
            for (JsonNode c : j.get("choices")) text.append(c.path("delta").path("content").asText(""));
        }
        assertEquals("ABC", text.toString());
        assertTrue(events[events.length - 2].contains("\"usage\""), "no usage chunk before [DONE]");
    }

    @Test
    void aGenerationPastTheRequestTimeoutIs504AndItsSequenceIsCancelled() throws Exception {
        AtomicBoolean cancelled = new AtomicBoolean();
        Serving stalled = new Serving() {   // admits every sequence and never steps it
            @Override
            public Ticket submit(Request r, Sink sink) {
                return () -> cancelled.set(true);
            }

            @Override
            public Stats stats() {
                return new Stats(0, 0, 0, 0, 0, 0, 0);
            }

            @Override
            public void drain() {}

            @Override
            public void close() {}
        };
        Server s = Server.start(stalled, ServedText.load(Repo.path("oracle-fixtures/tiny-k3"), 256),
                new Server.Settings("127.0.0.1", 0, "tiny-k3", null, 4096, Duration.ofSeconds(5), Duration.ofMillis(300), 128, false));
        try {
            HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(s.address() + "/v1/completions")).timeout(Duration.ofSeconds(30))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": [1], \"max_tokens\": 4}")).header("Content-Type", "application/json").build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(504, r.statusCode(), r.body());
            assertEquals("timeout", Requests.JSON.readTree(r.body()).get("error").get("code").asText(), r.body());
            assertTrue(cancelled.get(), "the timed-out sequence was not cancelled");
        } finally {
            s.close();
        }
    }

    @Test
    void metricsAreInThePrometheusTextFormat() throws Exception {
        HttpResponse<String> r = HTTP.send(HttpRequest.newBuilder(URI.create(server.address() + "/metrics")).header("Authorization", "Bearer " + KEY).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode());
        for (String m : List.of("k3_queue_depth", "k3_active_sequences", "k3_tokens_per_second", "k3_step_seconds", "k3_step_bytes_read")) {
            assertTrue(r.body().contains("# TYPE " + m + " gauge\n" + m + " "), m + " missing:\n" + r.body());
        }
    }
}
