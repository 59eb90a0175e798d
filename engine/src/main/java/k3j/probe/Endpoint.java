package k3j.probe;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import k3j.io.StrictJson;

/**
 * The server under test, over {@link HttpClient}: every request bounded in time ({@code timeout}) and the run in
 * number ({@code maxRequests}); 429 and 503 retried after the server's {@code Retry-After} (at most
 * {@link #MAX_RETRY_AFTER_SECONDS}) or a doubling backoff, at most {@code retries} times. Anything else that is not
 * 200 is an error named with its status and the server's own message.
 */
final class Endpoint implements AutoCloseable {
    static final long MAX_RETRY_AFTER_SECONDS = 30;
    /** The most of a response body read (a run's 36,864 positions with 20 alternatives each fit). */
    static final int MAX_BODY = 256 << 20;

    /** A planned request that got no usable answer: failed, timed out, refused, or rate-limited past its retries. */
    static final class Failed extends Exception {
        final boolean notServed;

        Failed(String message, boolean notServed) {
            super(message);
            this.notServed = notServed;
        }
    }

    private final URI root;
    private final String apiKey;
    private final Duration timeout;
    private final int retries, maxRequests;
    private final HttpClient http;
    private final AtomicInteger sent = new AtomicInteger(), retried = new AtomicInteger();

    Endpoint(URI root, String apiKey, Duration timeout, int retries, int maxRequests) {
        String s = root.toString();
        this.root = URI.create(s.endsWith("/") ? s.substring(0, s.length() - 1) : s);
        this.apiKey = apiKey;
        this.timeout = timeout;
        this.retries = retries;
        this.maxRequests = maxRequests;
        this.http = HttpClient.newBuilder().connectTimeout(timeout).version(HttpClient.Version.HTTP_1_1).build();
    }

    int sent() {
        return sent.get();
    }

    int retried() {
        return retried.get();
    }

    /** The URL of {@code form}: the root as given when it already ends in /v1, else with /v1. */
    URI uri(Form form) {
        String base = root.toString();
        String path = base.endsWith("/v1") ? form.path.substring(3) : form.path;
        return URI.create(base + path);
    }

    /** POSTs {@code body} to {@code form}'s path; {@code name} names the request in every message. Returns the 200 body. */
    byte[] post(String name, Form form, ObjectNode body) throws Failed, InterruptedException {
        byte[] json;
        try {
            json = StrictJson.MAPPER.writeValueAsBytes(body);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        URI uri = uri(form);
        String what = name + " (POST " + uri + ")";
        for (int attempt = 0; ; attempt++) {
            if (sent.incrementAndGet() > maxRequests) throw new Failed(what + ": not sent, past the run's bound of " + maxRequests + " requests (--max-requests)", false);
            HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(timeout).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofByteArray(json));
            if (apiKey != null) b.header("Authorization", "Bearer " + apiKey);
            HttpResponse<byte[]> r;
            try {
                r = http.send(b.build(), HttpResponse.BodyHandlers.ofByteArray());
            } catch (HttpTimeoutException e) {
                throw new Failed(what + ": no answer within " + timeout.toSeconds() + " s (--timeout)", false);
            } catch (IOException e) {
                throw new Failed(what + ": " + e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage()), false);
            }
            int st = r.statusCode();
            if (st == 200) {
                if (r.body().length > MAX_BODY) throw new Failed(what + ": a body of " + r.body().length + " bytes, more than " + MAX_BODY, false);
                return r.body();
            }
            if ((st == 429 || st == 503) && attempt < retries) {
                retried.incrementAndGet();
                Thread.sleep(wait(r, attempt));
                continue;
            }
            String msg = what + ": HTTP " + st + errorMessage(r.body()) + (st == 429 || st == 503 ? " (still after " + retries + " retries)" : "");
            throw new Failed(msg, st == 404 || st == 405 || st == 501);
        }
    }

    /** The wait before retry {@code attempt}: the server's Retry-After in seconds (capped), else 0.5 s doubling. */
    static long wait(HttpResponse<?> r, int attempt) {
        String h = r.headers().firstValue("Retry-After").orElse("");
        try {
            long s = Long.parseLong(h.strip());
            if (s >= 0) return Math.min(s, MAX_RETRY_AFTER_SECONDS) * 1000;
        } catch (NumberFormatException e) {
            // an HTTP date or nothing: the backoff below
        }
        return 500L << Math.min(attempt, 6);
    }

    /** ": the server's error.message", when the body is an OpenAI-style error object; else its first 200 characters. */
    static String errorMessage(byte[] body) {
        String text = new String(body, 0, Math.min(body.length, 4096), StandardCharsets.UTF_8);
        try {
            JsonNode n = StrictJson.MAPPER.readTree(body);
            JsonNode m = n == null ? null : n.path("error").path("message");
            if (m != null && m.isTextual()) return ": " + m.textValue();
        } catch (IOException | RuntimeException e) {
            // not JSON: shown as text
        }
        text = text.strip();
        return text.isEmpty() ? "" : ": " + (text.length() > 200 ? text.substring(0, 200) + "..." : text);
    }

    @Override
    public void close() {
        http.close();
    }
}
