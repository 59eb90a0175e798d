package k3j.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import k3j.api.Engine;
import k3j.chat.Message;
import k3j.chat.Role;
import k3j.chat.Thinking;
import k3j.chat.Xtml;
import k3j.api.internal.ApiInternals;
import k3j.kernels.Layers;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.tokenizer.Tokenizer;

/**
 * A small OpenAI-compatible server over real HTTP on loopback ({@code /v1/completions}, {@code /v1/chat/completions},
 * streamed or not, logprobs and top logprobs), computing real answers with k3j's forward: greedy, incremental, the
 * prompt prefilled in chunks of {@link #CHUNK} ids, requests that arrive together run as one batch stepped in turn
 * (a batch closes after {@link #GATHER_MS} ms without a new arrival). Without a fault it answers what k3j answers
 * alone, bit for bit, whatever runs beside it; each {@link Fault} plants one of the serving bugs K3 servers shipped.
 */
public final class FaultyServer implements AutoCloseable {
    /** Prompt ids fed in one prefill step at most. */
    public static final int CHUNK = 8;
    /** The ids the stale prefix cache keys on. */
    public static final int PREFIX_KEY = 4;
    static final int GATHER_MS = 40, MAX_BATCH_MS = 600;

    /** The planted serving faults. */
    public enum Fault {
        NONE,
        /** the softmax's sum reduced in float in as many parts as the batch holds: logprobs that depend on the batch's size */
        BATCH_DEPENDENT_LOGPROBS,
        /** a prefix cache keyed by the first ids only: a request continues the state of the last request that began alike */
        STALE_PREFIX_CACHE,
        /** each token reported with the logprobs (and token) of the next position */
        SHIFTED_LOGPROBS,
        /** one KDA state slot for the batch: each sequence steps on from the state the one before it left */
        SHARED_KDA_STATE,
        /** the KDA conv histories cleared between prefill chunks */
        CHUNK_DROPS_CONV,
        /** streamed logprobs printed rounded to 4 decimals (the answers in one piece exact) */
        STREAM_ROUNDS_LOGPROBS,
        /** the chat form's logprobs printed rounded to 4 decimals (the completions form's exact) */
        CHAT_ROUNDS_LOGPROBS
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private record Entry(int id, float logprob, int[] top, float[] topLp) {}

    private static final class Seq {
        final int[] prompt, fed;
        final int max, top;
        final CompletableFuture<List<Entry>> done = new CompletableFuture<>();
        final List<Entry> out = new ArrayList<>();
        DecodeState state;
        int prefilled;

        Seq(int[] prompt, int[] fed, int max, int top) {
            this.prompt = prompt;
            this.fed = fed;
            this.max = max;
            this.top = top;
        }
    }

    private final Fault fault;
    private final boolean chat;
    private final Forward forward;
    private final Tokenizer tok;
    private final int vocab, eos;
    private final HttpServer http;
    private final ExecutorService handlers = Executors.newVirtualThreadPerTaskExecutor();
    private final LinkedBlockingQueue<Seq> queue = new LinkedBlockingQueue<>();
    private final Thread stepper;
    private final Map<List<Integer>, int[]> lastByKey = new HashMap<>();
    private volatile boolean closed;

    /**
     * Starts serving {@code engine} (opened with its tokenizer) with {@code fault} planted; {@code chat}: whether the chat form is served.
     */
    public FaultyServer(Engine engine, Tokenizer tok, Fault fault, boolean chat) throws IOException {
        this.fault = fault;
        this.chat = chat;
        this.forward = ApiInternals.get().forward(engine);
        this.tok = tok;
        this.vocab = engine.shape().vocabSize();
        this.eos = engine.eos();
        http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        http.setExecutor(handlers);
        http.createContext("/v1/completions", x -> handle(x, false));
        http.createContext("/v1/chat/completions", x -> handle(x, true));
        stepper = Thread.ofPlatform().name("faulty-server-steps").daemon().start(this::steps);
        http.start();
    }

    /** {@return the server's root URL} */
    public URI uri() {
        return URI.create("http://127.0.0.1:" + http.getAddress().getPort());
    }

    @Override
    public void close() {
        closed = true;
        http.stop(0);
        stepper.interrupt();
        handlers.shutdownNow();
    }

    // ------------------------------------------------------------------ HTTP

    private void handle(HttpExchange x, boolean chatForm) throws IOException {
        try (x) {
            if (chatForm && !chat) {
                reply(x, 404, error("this server does not serve /v1/chat/completions"));
                return;
            }
            if (!x.getRequestMethod().equals("POST")) {
                reply(x, 405, error("POST only"));
                return;
            }
            JsonNode req;
            try {
                req = JSON.readTree(x.getRequestBody().readNBytes(1 << 20));
            } catch (IOException e) {
                reply(x, 400, error("malformed JSON"));
                return;
            }
            int[] prompt;
            int top;
            if (chatForm) {
                String text = req.path("messages").path(0).path("content").asText();
                Xtml t = new Xtml(tok);
                prompt = t.encode(t.render(List.of(new Message(Role.USER, text, null)), Thinking.OFF, true));
                top = req.path("logprobs").asBoolean() ? req.path("top_logprobs").asInt(0) : 0;
            } else {
                JsonNode p = req.path("prompt");
                prompt = p.isTextual() ? tok.encode(p.textValue(), false) : new int[p.size()];
                if (!p.isTextual()) for (int i = 0; i < prompt.length; i++) prompt[i] = p.get(i).asInt();
                top = req.path("logprobs").asInt(0);
            }
            int max = req.path("max_tokens").asInt(16);
            boolean stream = req.path("stream").asBoolean(false);
            Seq s = new Seq(prompt, fed(prompt), fault == Fault.SHIFTED_LOGPROBS ? max + 1 : max, Math.max(top, 1));
            queue.add(s);
            List<Entry> got;
            try {
                got = s.done.get(120, TimeUnit.SECONDS);
            } catch (Exception e) {
                reply(x, 500, error("the step failed: " + e));
                return;
            }
            if (fault == Fault.SHIFTED_LOGPROBS) got = got.subList(1, got.size());
            if (stream) stream(x, chatForm, prompt.length, got, top);
            else reply(x, 200, JSON.writeValueAsBytes(answer(chatForm, prompt.length, got, top)));
        }
    }

    /** The ids the state is built from: the prompt, or (stale prefix cache) the last prompt that began alike, then this one's tail. */
    private int[] fed(int[] prompt) {
        if (fault != Fault.STALE_PREFIX_CACHE || prompt.length < PREFIX_KEY) return prompt;
        List<Integer> key = Arrays.stream(prompt, 0, PREFIX_KEY).boxed().toList();
        synchronized (lastByKey) {
            int[] last = lastByKey.put(key, prompt);
            if (last == null) return prompt;
            int n = Math.min(last.length, prompt.length);
            int[] out = prompt.clone();
            System.arraycopy(last, 0, out, 0, n - 1);
            return out;
        }
    }

    private static byte[] error(String message) throws IOException {
        ObjectNode e = JSON.createObjectNode();
        e.putObject("error").put("message", message).put("type", "invalid_request_error");
        return JSON.writeValueAsBytes(e);
    }

    private static void reply(HttpExchange x, int status, byte[] body) throws IOException {
        x.getResponseHeaders().set("Content-Type", "application/json");
        x.sendResponseHeaders(status, body.length);
        try (OutputStream o = x.getResponseBody()) {
            o.write(body);
        }
    }

    private void stream(HttpExchange x, boolean chatForm, int promptTokens, List<Entry> got, int top) throws IOException {
        x.getResponseHeaders().set("Content-Type", "text/event-stream");
        x.sendResponseHeaders(200, 0);
        try (OutputStream o = x.getResponseBody()) {
            for (Entry e : got) {
                ObjectNode chunk = JSON.createObjectNode();
                ObjectNode c = chunk.putArray("choices").addObject();
                c.put("index", 0);
                logprobs(c, chatForm, List.of(e), top, fault == Fault.STREAM_ROUNDS_LOGPROBS);
                if (chatForm) c.putObject("delta").put("content", text(tok.bytes(e.id())));
                else c.put("text", text(tok.bytes(e.id())));
                o.write(("data: " + JSON.writeValueAsString(chunk) + "\n\n").getBytes(StandardCharsets.UTF_8));
                o.flush();
            }
            ObjectNode last = JSON.createObjectNode();
            last.putArray("choices");
            usage(last, promptTokens, got.size());
            o.write(("data: " + JSON.writeValueAsString(last) + "\n\ndata: [DONE]\n\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    private ObjectNode answer(boolean chatForm, int promptTokens, List<Entry> got, int top) {
        ObjectNode root = JSON.createObjectNode();
        root.put("object", chatForm ? "chat.completion" : "text_completion");
        ObjectNode c = root.putArray("choices").addObject();
        c.put("index", 0);
        StringBuilder text = new StringBuilder();
        for (Entry e : got) text.append(text(tok.bytes(e.id())));
        if (chatForm) c.putObject("message").put("role", "assistant").put("content", text.toString());
        else c.put("text", text.toString());
        logprobs(c, chatForm, got, top, chatForm && fault == Fault.CHAT_ROUNDS_LOGPROBS);
        c.put("finish_reason", got.size() > 0 && got.getLast().id() == eos ? "stop" : "length");
        usage(root, promptTokens, got.size());
        return root;
    }

    private static void usage(ObjectNode root, int prompt, int completion) {
        root.putObject("usage").put("prompt_tokens", prompt).put("completion_tokens", completion).put("total_tokens", prompt + completion);
    }

    private void logprobs(ObjectNode choice, boolean chatForm, List<Entry> got, int top, boolean rounded) {
        if (top == 0) return;
        if (rounded) got = got.stream().map(FaultyServer::rounded).toList();
        ObjectNode lp = choice.putObject("logprobs");
        if (chatForm) {
            ArrayNode content = lp.putArray("content");
            for (Entry e : got) {
                ObjectNode t = chatToken(content.addObject(), e.id(), e.logprob());
                ArrayNode alts = t.putArray("top_logprobs");
                for (int j = 0; j < top; j++) chatToken(alts.addObject(), e.top()[j], e.topLp()[j]);
            }
        } else {
            ArrayNode tokens = lp.putArray("tokens"), lps = lp.putArray("token_logprobs"), tops = lp.putArray("top_logprobs");
            for (Entry e : got) {
                tokens.add(shown(e.id()));
                lps.add(e.logprob());
                ObjectNode alts = tops.addObject();
                for (int j = 0; j < top; j++) alts.put(shown(e.top()[j]), e.topLp()[j]);
            }
        }
    }

    private static Entry rounded(Entry e) {
        float[] lps = new float[e.topLp().length];
        for (int j = 0; j < lps.length; j++) lps[j] = round(e.topLp()[j]);
        return new Entry(e.id(), round(e.logprob()), e.top(), lps);
    }

    private static float round(float x) {
        return (float) (Math.round(x * 1e4) / 1e4);
    }

    private ObjectNode chatToken(ObjectNode t, int id, float logprob) {
        byte[] b = tok.bytes(id);
        t.put("token", text(b));
        t.put("logprob", logprob);
        ArrayNode bytes = t.putArray("bytes");
        for (byte x : b) bytes.add(x & 0xff);
        return t;
    }

    /** A completions token as text: its UTF-8, or {@code bytes:\xNN} when it is not UTF-8 on its own. */
    private String shown(int id) {
        byte[] b = tok.bytes(id);
        String s = utf8(b);
        if (s != null) return s;
        StringBuilder sb = new StringBuilder("bytes:");
        for (byte x : b) sb.append(String.format("\\x%02x", x & 0xff));
        return sb.toString();
    }

    private static String text(byte[] b) {
        String s = utf8(b);
        return s != null ? s : new String(b, StandardCharsets.UTF_8);
    }

    private static String utf8(byte[] b) {
        return k3j.probe.Prompts.utf8(b);
    }

    // ------------------------------------------------------------------ the batch

    private void steps() {
        while (!closed) {
            List<Seq> batch = new ArrayList<>();
            try {
                Seq first = queue.poll(200, TimeUnit.MILLISECONDS);
                if (first == null) continue;
                batch.add(first);
                long end = System.nanoTime() + MAX_BATCH_MS * 1_000_000L;
                while (System.nanoTime() < end) {
                    Seq more = queue.poll(GATHER_MS, TimeUnit.MILLISECONDS);
                    if (more == null) break;
                    batch.add(more);
                }
            } catch (InterruptedException e) {
                return;
            }
            try {
                run(batch);
            } catch (RuntimeException | Error e) {
                for (Seq s : batch) s.done.completeExceptionally(e);
            }
        }
    }

    /** One batch to its end: every sequence stepped in turn, a prefill chunk or a decode token a step. */
    private void run(List<Seq> batch) {
        for (Seq s : batch) s.state = forward.newState(s.fed.length + s.max + 1);
        Seq last = null;
        while (batch.stream().anyMatch(s -> !s.done.isDone())) {
            for (Seq s : batch) {
                if (s.done.isDone()) continue;
                if (fault == Fault.SHARED_KDA_STATE && last != null && last != s) copyKda(last.state, s.state);
                int[] feed;
                if (s.prefilled < s.fed.length) {
                    int n = Math.min(CHUNK, s.fed.length - s.prefilled);
                    feed = Arrays.copyOfRange(s.fed, s.prefilled, s.prefilled + n);
                    if (fault == Fault.CHUNK_DROPS_CONV && s.prefilled > 0) dropConv(s.state);
                    s.prefilled += n;
                } else {
                    feed = new int[] {s.out.getLast().id()};
                }
                float[] logits = forward.step(feed, s.state, false, null).logits();
                last = s;
                if (s.prefilled < s.fed.length) continue;
                Entry e = entry(logits, s.top, batch.size());
                s.out.add(e);
                if (s.out.size() == s.max || e.id() == eos) s.done.complete(List.copyOf(s.out));
            }
        }
    }

    private static void copyKda(DecodeState from, DecodeState to) {
        for (int l = 0; l < from.layers(); l++) {
            Layers.KdaState a = from.kda(l), b = to.kda(l);
            if (a == null) continue;
            System.arraycopy(a.recurrent(), 0, b.recurrent(), 0, a.recurrent().length);
            System.arraycopy(a.qConv(), 0, b.qConv(), 0, a.qConv().length);
            System.arraycopy(a.kConv(), 0, b.kConv(), 0, a.kConv().length);
            System.arraycopy(a.vConv(), 0, b.vConv(), 0, a.vConv().length);
        }
    }

    private static void dropConv(DecodeState s) {
        for (int l = 0; l < s.layers(); l++) {
            Layers.KdaState k = s.kda(l);
            if (k == null) continue;
            Arrays.fill(k.qConv(), 0f);
            Arrays.fill(k.kConv(), 0f);
            Arrays.fill(k.vConv(), 0f);
        }
    }

    /** The greedy id, its logprob and the top alternatives (ties: the lower id first) from one row of logits. */
    private Entry entry(float[] logits, int top, int batchSize) {
        int v = vocab;
        float max = Float.NEGATIVE_INFINITY;
        for (int j = 0; j < v; j++) max = Math.max(max, logits[j]);
        double lse;
        if (fault == Fault.BATCH_DEPENDENT_LOGPROBS && batchSize > 1) {
            float[] parts = new float[batchSize];
            for (int j = 0; j < v; j++) parts[j % batchSize] += (float) Math.exp(logits[j] - max);
            float sum = 0;
            for (float p : parts) sum += p;
            lse = max + Math.log(sum);
        } else {
            double sum = 0;
            for (int j = 0; j < v; j++) sum += Math.exp((double) logits[j] - max);
            lse = max + Math.log(sum);
        }
        Integer[] order = new Integer[v];
        for (int j = 0; j < v; j++) order[j] = j;
        Arrays.sort(order, (a, b) -> logits[a] != logits[b] ? Float.compare(logits[b], logits[a]) : Integer.compare(a, b));
        int k = Math.min(top, v);
        int[] ids = new int[k];
        float[] lps = new float[k];
        for (int j = 0; j < k; j++) {
            ids[j] = order[j];
            lps[j] = (float) (logits[order[j]] - lse);
        }
        return new Entry(ids[0], lps[0], ids, lps);
    }
}
