package k3j.serve;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.util.List;
import k3j.api.ServedText;
import k3j.api.Serving;

/**
 * The OpenAI shapes of an answer: a completion or a chat completion, whole or as stream chunks, with logprobs
 * (a float32 logprob written as its shortest decimal: read back as float32 it is the same bits), the ids
 * ({@code token_ids}, as vLLM returns them) and usage.
 */
final class Answers {
    private static final JsonNodeFactory F = JsonNodeFactory.instance;
    private final ServedText text;
    private final String model;
    private final boolean tokensAsIds;

    Answers(ServedText text, String model, boolean tokensAsIds) {
        this.text = text;
        this.model = model;
        this.tokensAsIds = tokensAsIds || !text.hasTokenizer();
    }

    ObjectNode head(String id, String object, long created) {
        ObjectNode o = F.objectNode();
        o.put("id", id);
        o.put("object", object);
        o.put("created", created);
        o.put("model", model);
        return o;
    }

    /**
     * The token as a string: its text, {@code bytes:\xNN...} when its bytes are not UTF-8 on their own (a piece of a
     * character: as OpenAI prints it, so no byte is lost to U+FFFD), or {@code token_id:N} (asked for, or an id
     * that names no bytes).
     */
    String token(int id) {
        byte[] b = tokensAsIds ? null : text.bytes(id);
        if (b == null || b.length == 0) return "token_id:" + id;
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            StringBuilder s = new StringBuilder(6 + 4 * b.length).append("bytes:");
            for (byte x : b) s.append(String.format(java.util.Locale.ROOT, "\\x%02x", x & 0xff));
            return s.toString();
        }
    }

    ArrayNode bytes(int id) {
        ArrayNode a = F.arrayNode();
        if (text.hasTokenizer()) for (byte b : text.bytes(id)) a.add(b & 0xff);
        return a;
    }

    /** A chat's logprobs entry: token, logprob, bytes and the alternatives. */
    ObjectNode chatEntry(Serving.TokenLogprob t, int top) {
        ObjectNode e = F.objectNode();
        entry(e, t.id(), t.logprob());
        ArrayNode alts = e.putArray("top_logprobs");
        for (int i = 0; i < Math.min(top, t.topIds().length); i++) entry(alts.addObject(), t.topIds()[i], t.topLogprobs()[i]);
        return e;
    }

    private void entry(ObjectNode e, int id, float logprob) {
        e.put("token", token(id));
        e.put("logprob", logprob);
        e.set("bytes", bytes(id));
    }

    ObjectNode chatLogprobs(List<Serving.TokenLogprob> ts, int top) {
        ObjectNode l = F.objectNode();
        ArrayNode c = l.putArray("content");
        for (Serving.TokenLogprob t : ts) c.add(chatEntry(t, top));
        return l;
    }

    /** A completion's logprobs: tokens, token_logprobs, top_logprobs, text_offset; the prompt's first id has no logprob. */
    ObjectNode completionLogprobs(int[] promptIds, List<Serving.TokenLogprob> prompt, List<Serving.TokenLogprob> generated, int top, int offset) {
        ObjectNode l = F.objectNode();
        ArrayNode tokens = l.putArray("tokens"), lps = l.putArray("token_logprobs"), tops = l.putArray("top_logprobs"), offs = l.putArray("text_offset");
        int at = offset;
        if (promptIds != null) {
            tokens.add(token(promptIds[0]));
            lps.addNull();
            tops.addNull();
            offs.add(at);
            at += tokenChars(promptIds[0]);
            for (Serving.TokenLogprob t : prompt) at = completionEntry(t, top, tokens, lps, tops, offs, at);
        }
        for (Serving.TokenLogprob t : generated) at = completionEntry(t, top, tokens, lps, tops, offs, at);
        return l;
    }

    private int completionEntry(Serving.TokenLogprob t, int top, ArrayNode tokens, ArrayNode lps, ArrayNode tops, ArrayNode offs, int at) {
        tokens.add(token(t.id()));
        lps.add(t.logprob());
        ObjectNode alts = tops.addObject();
        for (int i = 0; i < Math.min(top, t.topIds().length); i++) {
            String k = token(t.topIds()[i]);
            if (!alts.has(k)) alts.put(k, t.topLogprobs()[i]);
        }
        offs.add(at);
        return at + tokenChars(t.id());
    }

    private int tokenChars(int id) {
        return text.hasTokenizer() ? new String(text.bytes(id), StandardCharsets.UTF_8).length() : 0;
    }

    static ArrayNode ids(List<Serving.TokenLogprob> ts) {
        ArrayNode a = F.arrayNode();
        for (Serving.TokenLogprob t : ts) a.add(t.id());
        return a;
    }

    static ObjectNode usage(int prompt, int completion) {
        ObjectNode u = F.objectNode();
        u.put("prompt_tokens", prompt);
        u.put("completion_tokens", completion);
        u.put("total_tokens", prompt + completion);
        return u;
    }
}
