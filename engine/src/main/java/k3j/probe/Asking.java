package k3j.probe;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import k3j.io.StrictJson;
import k3j.provider.ProviderGrade;
import k3j.provider.ProviderResponse;
import k3j.tokenizer.Tokenizer;

/**
 * The requests a probe makes and how their answers are read: greedy (temperature 0), one choice, {@code gen} tokens at
 * most, {@code top} alternatives per token; completions with the prompt as ids, chat with one user message. A
 * streamed answer's server-sent events are joined into the one response they stand for and read the same way.
 */
final class Asking {
    private final Endpoint endpoint;
    private final String model;
    private final int gen, top;
    private final Tokenizer tok;
    private final int vocab;

    Asking(Endpoint endpoint, String model, int gen, int top, Tokenizer tok, int vocab) {
        this.endpoint = endpoint;
        this.model = model;
        this.gen = gen;
        this.top = top;
        this.tok = tok;
        this.vocab = vocab;
    }

    int gen() {
        return gen;
    }

    /** Asks {@code p} in {@code form} for {@code tokens} greedy tokens (streamed or not). */
    Answer ask(String name, Form form, Prompt p, int tokens, boolean stream) throws Endpoint.Failed, InterruptedException {
        if (form == Form.CHAT && p.text() == null) throw new Endpoint.Failed(name + ": not asked: the prompt's ids are no UTF-8 text, so it has no chat form", false);
        ObjectNode body = StrictJson.MAPPER.createObjectNode();
        body.put("model", model);
        if (form == Form.COMPLETIONS) {
            ArrayNode ids = body.putArray("prompt");
            for (int id : p.ids()) ids.add(id);
            body.put("logprobs", top);
        } else {
            ObjectNode m = body.putArray("messages").addObject();
            m.put("role", "user");
            m.put("content", p.text());
            body.put("logprobs", true);
            body.put("top_logprobs", top);
        }
        body.put("max_tokens", tokens);
        body.put("temperature", 0);
        body.put("n", 1);
        if (stream) {
            body.put("stream", true);
            body.putObject("stream_options").put("include_usage", true);
        }
        byte[] got = endpoint.post(name, form, body);
        Path source = Path.of(name.replace('/', '|'));
        try {
            ProviderResponse r = ProviderResponse.parse(stream ? joined(got, form, name) : got, source);
            ProviderGrade.Ids ids = TokenIdentity.ids(r, tok, vocab, name);
            int[] prompt = p.ids(form);
            if (r.promptTokens() >= 0 && r.promptTokens() != prompt.length) {
                throw new ProviderResponse.RefusedException(name + ": the server counted " + r.promptTokens() + " prompt tokens (usage.prompt_tokens), the prompt here is "
                        + prompt.length + " ids: it read another prompt (a system prompt it adds, another chat template, a BOS)");
            }
            if (ids.size() > tokens) throw new ProviderResponse.RefusedException(name + ": " + ids.size() + " completion tokens, " + tokens + " asked at most (max_tokens)");
            return new Answer(name, form, prompt, r, ids);
        } catch (ProviderResponse.RefusedException e) {
            throw e.getMessage().startsWith(name) ? e : new ProviderResponse.RefusedException(name + ": " + e.getMessage());
        }
    }

    /**
     * The events of a streamed answer ({@code data: {...}} lines, ending in {@code data: [DONE]}) as one response:
     * every chunk's logprobs appended in order, the usage of the chunk that gives it. A stream without its
     * {@code [DONE]} is refused: it ended early.
     */
    static byte[] joined(byte[] sse, Form form, String name) {
        ObjectNode lp = StrictJson.MAPPER.createObjectNode();
        ArrayNode content = null, tokens = null, tokenLps = null, tops = null;
        if (form == Form.CHAT) content = lp.putArray("content");
        else {
            tokens = lp.putArray("tokens");
            tokenLps = lp.putArray("token_logprobs");
            tops = lp.putArray("top_logprobs");
        }
        JsonNode usage = null;
        boolean done = false;
        int events = 0;
        for (String line : new String(sse, StandardCharsets.UTF_8).split("\n")) {
            line = line.strip();
            if (!line.startsWith("data:")) continue;
            String data = line.substring(5).strip();
            if (done) throw new ProviderResponse.RefusedException(name + ": an event after data: [DONE]");
            if (data.equals("[DONE]")) {
                done = true;
                continue;
            }
            events++;
            JsonNode chunk;
            try {
                chunk = StrictJson.MAPPER.readTree(data);
            } catch (IOException e) {
                throw new ProviderResponse.RefusedException(name + ": streamed event " + events + " is not JSON: " + k3j.io.SafeFiles.why(e));
            }
            if (chunk.has("usage") && !chunk.get("usage").isNull()) usage = chunk.get("usage");
            JsonNode choices = chunk.path("choices");
            if (choices.isEmpty()) continue;
            if (choices.size() != 1) throw new ProviderResponse.RefusedException(name + ": streamed event " + events + " holds " + choices.size() + " choices; one was asked");
            JsonNode l = choices.get(0).path("logprobs");
            if (l.isMissingNode() || l.isNull()) continue;
            if (form == Form.CHAT) {
                for (JsonNode t : l.path("content")) content.add(t);
            } else {
                for (JsonNode t : l.path("tokens")) tokens.add(t);
                for (JsonNode t : l.path("token_logprobs")) tokenLps.add(t);
                for (JsonNode t : l.path("top_logprobs")) tops.add(t);
            }
        }
        if (!done) throw new ProviderResponse.RefusedException(name + ": the stream ended without data: [DONE] (" + events + " events)");
        ObjectNode root = StrictJson.MAPPER.createObjectNode();
        root.putArray("choices").addObject().set("logprobs", lp);
        if (usage != null) root.set("usage", usage);
        try {
            return StrictJson.MAPPER.writeValueAsBytes(root);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
