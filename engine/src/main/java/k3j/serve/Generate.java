package k3j.serve;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import k3j.api.ServedText;
import k3j.api.Serving;

/**
 * POST /v1/completions and /v1/chat/completions once the body is checked: the sequence submitted to the batch,
 * its events turned into one answer or into server-sent events ending in {@code data: [DONE]}. A client gone
 * (its connection closed, or a write that fails) cancels its sequence; the batch frees its slot before the next step.
 */
final class Generate {
    private final Serving serving;
    private final ServedText text;
    private final Answers answers;
    private final long timeoutNanos;
    private final AtomicLong counter = new AtomicLong();
    private final java.util.function.BooleanSupplier draining;

    Generate(Serving serving, ServedText text, Answers answers, long timeoutNanos, java.util.function.BooleanSupplier draining) {
        this.draining = draining;
        this.serving = serving;
        this.text = text;
        this.answers = answers;
        this.timeoutNanos = timeoutNanos;
    }

    /** The answer of a request that does not stream; {@code clientGone} tells when its client hung up (the sequence is then cancelled). */
    ObjectNode whole(Job job, java.util.function.BooleanSupplier clientGone) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutNanos;
        Call call = submit(job, clientGone);
        try {
            while (call.advance(deadline)) {
                // the events are taken in by advance
            }
        } finally {
            call.cancel();
        }
        long created = System.currentTimeMillis() / 1000;
        int completion = completionTokens(call);
        if (job.chat()) {
            ObjectNode o = answers.head("chatcmpl-" + counter.incrementAndGet(), "chat.completion", created);
            ObjectNode c = o.putArray("choices").addObject();
            c.put("index", 0);
            ObjectNode m = c.putObject("message");
            m.put("role", "assistant");
            m.put("content", call.visible);
            if (job.thinking().on()) m.put("reasoning_content", call.reasoning);
            if (job.logprobs()) c.set("logprobs", answers.chatLogprobs(call.tokens, job.topLogprobs()));
            else c.putNull("logprobs");
            c.put("finish_reason", call.finish);
            c.set("token_ids", Answers.ids(call.tokens));
            c.set("prompt_token_ids", promptIds(job));
            o.set("usage", Answers.usage(job.prompt().length, completion));
            return o;
        }
        ObjectNode o = answers.head("cmpl-" + counter.incrementAndGet(), "text_completion", created);
        ObjectNode c = o.putArray("choices").addObject();
        c.put("index", 0);
        String prompt = job.echo() && text.hasTokenizer() ? text.text(job.prompt()) : "";
        c.put("text", prompt + call.visible);
        if (job.logprobs()) c.set("logprobs", answers.completionLogprobs(job.echo() ? job.prompt() : null, call.promptEntries, call.tokens, job.topLogprobs(), 0));
        else c.putNull("logprobs");
        c.put("finish_reason", call.finish);
        c.set("token_ids", Answers.ids(call.tokens));
        c.set("prompt_token_ids", promptIds(job));
        o.set("usage", Answers.usage(job.prompt().length, completion));
        return o;
    }

    /**
     * Streams the answer as server-sent events to {@code out}; returns when it ended or its client went away.
     * Headers are already sent: a failure from here on is an error event, then {@code [DONE]}.
     */
    void stream(Job job, Call call, OutputStream out) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutNanos;
        long created = System.currentTimeMillis() / 1000;
        String id = (job.chat() ? "chatcmpl-" : "cmpl-") + counter.incrementAndGet();
        String object = job.chat() ? "chat.completion.chunk" : "text_completion";
        try {
            if (job.chat()) {
                ObjectNode first = chunk(id, object, created);
                ObjectNode d = first.withArray("choices").addObject().put("index", 0).putObject("delta");
                d.put("role", "assistant");
                d.put("content", "");
                ((ObjectNode) first.withArray("choices").get(0)).putNull("logprobs").putNull("finish_reason");
                send(out, first.toString());
            } else if (job.echo() && text.hasTokenizer()) {
                ObjectNode first = chunk(id, object, created);
                first.withArray("choices").addObject().put("index", 0).put("text", text.text(job.prompt())).putNull("logprobs").putNull("finish_reason");
                send(out, first.toString());
            }
            int sentChars = 0, sentReasoning = 0, sentTokens = 0;
            boolean going = true;
            try {
                while (going) {
                    going = call.advance(deadline);
                    int upTo = call.sendable();
                    boolean newTokens = call.tokens.size() > sentTokens;
                    boolean newReasoning = call.reasoning.length() > sentReasoning;
                    if (!newTokens && upTo <= sentChars && !newReasoning) continue;
                    ObjectNode ch = chunk(id, object, created);
                    ObjectNode c = ch.withArray("choices").addObject();
                    c.put("index", 0);
                    String delta = upTo > sentChars ? call.visible.substring(sentChars, upTo) : "";
                    List<Serving.TokenLogprob> fresh = call.tokens.subList(sentTokens, call.tokens.size());
                    if (job.chat()) {
                        ObjectNode d = c.putObject("delta");
                        d.put("content", delta);
                        if (newReasoning) d.put("reasoning_content", call.reasoning.substring(sentReasoning));
                        if (job.logprobs()) c.set("logprobs", answers.chatLogprobs(fresh, job.topLogprobs()));
                        else c.putNull("logprobs");
                    } else {
                        c.put("text", delta);
                        if (job.logprobs()) {
                            c.set("logprobs", answers.completionLogprobs(null, List.of(), fresh, job.topLogprobs(), sentChars));
                        } else c.putNull("logprobs");
                    }
                    c.putNull("finish_reason");
                    c.set("token_ids", Answers.ids(fresh));
                    send(out, ch.toString());
                    sentChars = Math.max(sentChars, upTo);
                    sentReasoning = call.reasoning.length();
                    sentTokens = call.tokens.size();
                }
            } catch (ApiError e) {
                send(out, e.json().toString());
                send(out, "[DONE]");
                return;
            }
            ObjectNode last = chunk(id, object, created);
            ObjectNode c = last.withArray("choices").addObject();
            c.put("index", 0);
            String rest = call.visible.length() > sentChars ? call.visible.substring(sentChars) : "";
            if (job.chat()) c.putObject("delta").put("content", rest);
            else c.put("text", rest);
            c.putNull("logprobs");
            c.put("finish_reason", call.finish);
            send(out, last.toString());
            if (job.includeUsage()) {
                ObjectNode u = chunk(id, object, created);
                u.putArray("choices");
                u.set("usage", Answers.usage(job.prompt().length, completionTokens(call)));
                send(out, u.toString());
            }
            send(out, "[DONE]");
        } catch (IOException gone) {
            call.cancel();   // the client went away: its slot is freed before the next step
        } finally {
            call.cancel();
        }
    }

    /** The sequence queued, cancelled once {@code clientGone} says so; a refusal as 429 (the queue is full) or 400 (it can never fit). */
    Call submit(Job job, java.util.function.BooleanSupplier clientGone) {
        Call call = new Call(job, text, clientGone);
        boolean promptLogprobs = job.echo() && job.logprobs();
        Serving.Request r = new Serving.Request(job.prompt(), job.maxTokens(), job.sampling(), job.topLogprobs(), promptLogprobs, job.stopAtEos() || job.chat());
        try {
            call.submitted(serving.submit(r, call));
        } catch (Serving.Rejected e) {
            if (draining.getAsBoolean()) throw new ApiError(503, "server_overloaded", null, "shutting_down", "the server is shutting down: it takes no new requests", 5);
            if (e.retryable()) throw new ApiError(429, "rate_limit_exceeded", null, "rate_limit_exceeded", e.getMessage(), 1);
            throw new ApiError(503, "server_overloaded", null, "plan_refused", e.getMessage(), 30);
        }
        return call;
    }

    private static ArrayNode promptIds(Job job) {
        ArrayNode p = com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.arrayNode();
        for (int id : job.prompt()) p.add(id);
        return p;
    }

    private static int completionTokens(Call call) {
        return call.tokens.size() + ("stop".equals(call.finish) && call.endedOnMarker() ? 1 : 0);
    }

    private ObjectNode chunk(String id, String object, long created) {
        return answers.head(id, object, created);
    }

    private static void send(OutputStream out, String data) throws IOException {
        out.write(("data: " + data + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }
}
