package k3j.serve;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.javalin.Javalin;
import io.javalin.compression.CompressionStrategy;
import io.javalin.http.Context;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import k3j.api.ServedText;
import k3j.api.Serving;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.ServerConnector;

/**
 * An OpenAI-compatible HTTP server over a {@link Serving} batch: GET /v1/models, POST /v1/completions, POST
 * /v1/chat/completions (whole or streamed as server-sent events), GET /health and GET /metrics. Every refusal is an
 * OpenAI error object with its status; nothing a request sends reaches the batch unchecked.
 */
public final class Server implements AutoCloseable {
    /**
     * How the server listens and what it accepts.
     *
     * @param host           the address to bind (loopback unless asked)
     * @param port           the port, 0: a free one
     * @param model          the model's id in /v1/models and requests
     * @param apiKey         the bearer key every request but /health must carry, or null: none
     * @param maxBody        a request body's bytes at most
     * @param idleTimeout    a connection silent this long is closed (slow clients)
     * @param requestTimeout a generation running this long is cancelled (504)
     * @param maxContext     prompt plus generated ids of one sequence at most
     * @param tokensAsIds    logprobs name tokens {@code token_id:N} rather than by their text
     */
    public record Settings(String host, int port, String model, String apiKey, long maxBody, Duration idleTimeout, Duration requestTimeout,
                           int maxContext, boolean tokensAsIds) {}

    private final Serving serving;
    private final Settings settings;
    private final Requests requests;
    private final Generate generate;
    private final Metrics metrics = new Metrics();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final byte[] key;
    private final Javalin app;
    private volatile ServerConnector connector;
    private volatile boolean draining;

    private Server(Serving serving, ServedText text, Settings s) {
        this.serving = serving;
        this.settings = s;
        this.key = s.apiKey() == null ? null : s.apiKey().getBytes(StandardCharsets.UTF_8);
        this.requests = new Requests(text, s.model(), s.maxContext());
        this.generate = new Generate(serving, text, new Answers(text, s.model(), s.tokensAsIds()), s.requestTimeout().toNanos(), () -> draining);
        this.app = Javalin.create(cfg -> {
            cfg.startup.showJavalinBanner = false;
            cfg.startup.showOldJavalinVersionWarning = false;
            cfg.concurrency.useVirtualThreads = true;
            cfg.http.maxRequestSize = s.maxBody();
            cfg.http.compressionStrategy = CompressionStrategy.NONE;
            cfg.jetty.addConnector((server, http) -> {
                http.setSendServerVersion(false);
                ServerConnector c = new ServerConnector(server, new HttpConnectionFactory(http));
                c.setHost(s.host());
                c.setPort(s.port());
                c.setIdleTimeout(s.idleTimeout().toMillis());
                connector = c;
                return c;
            });
            cfg.routes.before(this::authorize);
            cfg.routes.get("/health", ctx -> ctx.status(draining ? 503 : 200).json(JsonNodeFactory.instance.objectNode().put("status", draining ? "draining" : "ok")));
            cfg.routes.get("/metrics", ctx -> ctx.contentType("text/plain; version=0.0.4; charset=utf-8").result(metrics.text(serving.stats(), inFlight.get())));
            cfg.routes.get("/v1/models", ctx -> ctx.json(models()));
            cfg.routes.post("/v1/completions", ctx -> generation(ctx, false));
            cfg.routes.post("/v1/chat/completions", ctx -> generation(ctx, true));
            cfg.routes.exception(ApiError.class, (e, ctx) -> error(ctx, e));
            cfg.routes.exception(Exception.class, (e, ctx) -> error(ctx, new ApiError(500, "server_error", null, null, "the server failed: " + e, 0)));
            cfg.routes.error(404, ctx -> {
                if (ctx.res().getContentType() == null || !ctx.res().getContentType().startsWith("application/json")) error(ctx, new ApiError(404, "invalid_request_error", null, "not_found", "no such endpoint: " + ctx.method() + " " + ctx.path(), 0));
            });
            cfg.routes.error(405, ctx -> error(ctx, new ApiError(405, "invalid_request_error", null, "method_not_allowed", ctx.method() + " is not allowed on " + ctx.path(), 0)));
            cfg.routes.after(ctx -> metrics.answered(ctx.statusCode()));
        });
    }

    /**
     * Starts a server over {@code serving}.
     *
     * @param serving the batch
     * @param text    the model's ids and text
     * @param s       how to listen
     * @return the running server
     */
    public static Server start(Serving serving, ServedText text, Settings s) {
        Server server = new Server(serving, text, s);
        server.app.start();
        return server;
    }

    /** {@return the port it listens on} */
    public int port() {
        return connector.getLocalPort();
    }

    /** {@return the base address, http://host:port} */
    public String address() {
        String h = settings.host().contains(":") ? "[" + settings.host() + "]" : settings.host();
        return "http://" + h + ":" + port();
    }

    /**
     * Refuses new requests (503 with Retry-After), lets the batch finish the sequences it admitted and the
     * requests in flight send their answers (at most {@code grace}), then stops listening.
     *
     * @param grace how long in-flight requests may take to finish
     * @return whether every in-flight request finished within it
     */
    public boolean drain(Duration grace) throws InterruptedException {
        draining = true;
        serving.drain();
        long deadline = System.nanoTime() + grace.toNanos();
        while (inFlight.get() > 0 && System.nanoTime() < deadline) Thread.sleep(20);
        boolean all = inFlight.get() == 0;
        app.stop();
        return all;
    }

    @Override
    public void close() {
        draining = true;
        app.stop();
    }

    private void authorize(Context ctx) {
        if (key == null || ctx.path().equals("/health")) return;
        String h = ctx.header("Authorization");
        byte[] given = h != null && h.startsWith("Bearer ") ? h.substring(7).getBytes(StandardCharsets.UTF_8) : new byte[0];
        if (!MessageDigest.isEqual(given, key)) {
            throw new ApiError(401, "invalid_request_error", null, "invalid_api_key", "a valid API key is required: Authorization: Bearer KEY", 0);
        }
    }

    private ObjectNode models() {
        ObjectNode o = JsonNodeFactory.instance.objectNode();
        o.put("object", "list");
        ObjectNode m = o.putArray("data").addObject();
        m.put("id", settings.model());
        m.put("object", "model");
        m.put("created", 0);
        m.put("owned_by", "k3j");
        m.put("max_model_len", settings.maxContext());
        return o;
    }

    private void generation(Context ctx, boolean chat) throws InterruptedException {
        inFlight.incrementAndGet();
        try {
            if (draining) throw new ApiError(503, "server_overloaded", null, "shutting_down", "the server is shutting down: it takes no new requests", 5);
            JsonNode body = Requests.parse(body(ctx));
            Job job = chat ? requests.chat(body) : requests.completion(body);
            if (!job.stream()) {
                ctx.json(generate.whole(job, peerClosed(ctx)));
                return;
            }
            Call call = generate.submit(job, peerClosed(ctx));
            ctx.status(200);
            var res = ctx.res();
            res.setContentType("text/event-stream; charset=utf-8");
            res.setHeader("Cache-Control", "no-cache");
            OutputStream out;
            try {
                out = res.getOutputStream();
            } catch (IOException e) {
                call.cancel();
                return;
            }
            generate.stream(job, call, out);
        } finally {
            inFlight.decrementAndGet();
        }
    }

    /** Whether the request's client has hung up (never, where the kernel's socket table cannot tell). */
    private static java.util.function.BooleanSupplier peerClosed(Context ctx) {
        try {
            var r = ctx.req();
            return PeerClosed.of(java.net.InetAddress.getByName(r.getLocalAddr()), r.getLocalPort(), java.net.InetAddress.getByName(r.getRemoteAddr()), r.getRemotePort());
        } catch (java.net.UnknownHostException e) {
            return () -> false;
        }
    }

    /** The body, refused (413) past the limit before more than the limit is read. */
    private byte[] body(Context ctx) {
        long declared = ctx.req().getContentLengthLong();
        long max = settings.maxBody();
        if (declared > max) throw tooLarge(declared + " bytes");
        try (InputStream in = ctx.req().getInputStream()) {
            byte[] b = in.readNBytes((int) Math.min(Integer.MAX_VALUE - 8, max + 1));
            if (b.length > max) throw tooLarge("more than " + max + " bytes");
            return b;
        } catch (IOException e) {
            throw new ApiError(408, "invalid_request_error", null, "request_timeout", "the request body could not be read: " + e.getMessage(), 0);
        }
    }

    private ApiError tooLarge(String what) {
        return new ApiError(413, "invalid_request_error", null, "request_too_large", "the body has " + what + ", more than the server's limit of " + settings.maxBody() + " bytes", 0);
    }

    private static void error(Context ctx, ApiError e) {
        ctx.status(e.status);
        if (e.retryAfter > 0) ctx.header("Retry-After", Integer.toString(e.retryAfter));
        ctx.contentType("application/json").result(e.json().toString());
    }
}
