package k3j.serve;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import k3j.api.History;
import k3j.api.Sampling;
import k3j.api.ServedText;
import k3j.chat.Thinking;

/**
 * Request bodies read and checked before anything runs: malformed JSON, an unknown field, a field of the wrong type
 * or out of its range, ids the model does not have, a prompt past the context: each a 400 that names the field.
 */
final class Requests {
    static final ObjectMapper JSON = JsonMapper.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS).build();
    static final int MAX_STOPS = 4, MAX_STOP_CHARS = 256;

    private static final Set<String> COMMON = Set.of("model", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "stream_options", "n",
            "user", "frequency_penalty", "presence_penalty", "ignore_eos", "top_k");
    private static final Set<String> COMPLETION = union(COMMON, Set.of("prompt", "logprobs", "echo"));
    private static final Set<String> CHAT = union(COMMON, Set.of("messages", "logprobs", "top_logprobs", "max_completion_tokens", "reasoning_effort"));

    private final ServedText text;
    private final String model;
    private final int maxContext;

    Requests(ServedText text, String model, int maxContext) {
        this.text = text;
        this.model = model;
        this.maxContext = maxContext;
    }

    static JsonNode parse(byte[] body) {
        try {
            JsonNode n = JSON.readTree(body);
            if (n == null || !n.isObject()) throw ApiError.invalid(null, "invalid_json", "the body must be a JSON object");
            return n;
        } catch (JsonProcessingException e) {
            throw ApiError.invalid(null, "invalid_json", "the body is not valid JSON: " + e.getOriginalMessage());
        } catch (java.io.IOException e) {
            throw ApiError.invalid(null, "invalid_json", "the body could not be read: " + e.getMessage());
        }
    }

    /** A POST /v1/completions body. */
    Job completion(JsonNode b) {
        common(b, COMPLETION);
        int[] prompt = prompt(b.get("prompt"));
        int lp = b.has("logprobs") && !b.get("logprobs").isNull() ? integer(b, "logprobs", 0, 20, 0) : -1;
        boolean echo = bool(b, "echo", false);
        return job(b, false, prompt, integer(b, "max_tokens", 1, Integer.MAX_VALUE, 16), lp >= 0, Math.max(lp, 0), echo, null);
    }

    /** A POST /v1/chat/completions body. */
    Job chat(JsonNode b) {
        common(b, CHAT);
        if (!text.hasChat()) throw ApiError.invalid("messages", "this model has no tokenizer with the K3 chat markers: use /v1/completions with token ids");
        Thinking thinking = thinking(b);
        int[] prompt = text.chatPrompt(history(b.get("messages")), thinking);
        boolean logprobs = bool(b, "logprobs", false);
        int top = integer(b, "top_logprobs", 0, 20, 0);
        if (top > 0 && !logprobs) throw ApiError.invalid("top_logprobs", "top_logprobs needs logprobs: true");
        String limitName = b.has("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
        int room = Math.max(1, Math.min(4096, maxContext - prompt.length));
        return job(b, true, prompt, integer(b, limitName, 1, Integer.MAX_VALUE, room), logprobs, top, false, thinking);
    }

    private Job job(JsonNode b, boolean chat, int[] prompt, int maxTokens, boolean logprobs, int top, boolean echo, Thinking thinking) {
        if ((long) prompt.length + maxTokens > maxContext) {
            throw ApiError.invalid(chat ? "messages" : "prompt", "context_length_exceeded", "this request needs " + ((long) prompt.length + maxTokens)
                    + " positions (" + prompt.length + " in the prompt + " + maxTokens + " to generate), more than the " + maxContext + " the server holds per sequence");
        }
        double temperature = number(b, "temperature", 0, 2, 1);
        double topP = number(b, "top_p", Double.MIN_VALUE, 1, 1);
        int topK = integer(b, "top_k", 0, Integer.MAX_VALUE, 0);
        long seed = b.has("seed") && !b.get("seed").isNull() ? longValue(b, "seed") : 0;
        Sampling sampling;
        try {
            sampling = new Sampling(temperature, topP, topK, seed);
        } catch (IllegalArgumentException e) {
            throw ApiError.invalid("temperature", e.getMessage());
        }
        boolean stream = bool(b, "stream", false);
        JsonNode so = b.get("stream_options");
        boolean usage = false;
        if (so != null && !so.isNull()) {
            if (!stream) throw ApiError.invalid("stream_options", "stream_options needs stream: true");
            if (!so.isObject()) throw ApiError.invalid("stream_options", "stream_options must be an object");
            for (var it = so.fieldNames(); it.hasNext(); ) {
                String f = it.next();
                if (!f.equals("include_usage")) throw ApiError.invalid("stream_options." + f, "unknown field stream_options." + f);
            }
            usage = bool(so, "include_usage", false);
        }
        return new Job(chat, prompt, maxTokens, sampling, logprobs, top, echo, stops(b.get("stop")), !bool(b, "ignore_eos", false), stream, usage, thinking);
    }

    private void common(JsonNode b, Set<String> known) {
        for (var it = b.fieldNames(); it.hasNext(); ) {
            String f = it.next();
            if (!known.contains(f)) throw ApiError.invalid(f, "unknown field '" + f + "'");
        }
        JsonNode m = b.get("model");
        if (m != null && !m.isNull()) {
            if (!m.isTextual()) throw ApiError.invalid("model", "model must be a string");
            if (!m.asText().equals(model)) {
                throw new ApiError(404, "invalid_request_error", "model", "model_not_found", "the model '" + m.asText() + "' is not served here; this server serves '" + model + "'", 0);
            }
        }
        if (integer(b, "n", 1, Integer.MAX_VALUE, 1) != 1) throw ApiError.invalid("n", "n must be 1: one choice per request");
        for (String p : new String[] {"frequency_penalty", "presence_penalty"}) {
            if (number(b, p, -2, 2, 0) != 0) throw ApiError.invalid(p, p + " is not supported: only 0");
        }
        JsonNode u = b.get("user");
        if (u != null && !u.isNull() && !u.isTextual()) throw ApiError.invalid("user", "user must be a string");
    }

    private int[] prompt(JsonNode p) {
        if (p == null || p.isNull()) throw ApiError.invalid("prompt", "prompt is required: a string or a list of token ids");
        if (p.isTextual()) {
            if (!text.hasTokenizer()) throw ApiError.invalid("prompt", "this model has no tokenizer: give the prompt as a list of token ids");
            int[] ids = text.encode(p.asText());
            if (ids.length == 0) throw ApiError.invalid("prompt", "the prompt is empty");
            return ids;
        }
        if (p.isArray()) {
            if (p.isEmpty()) throw ApiError.invalid("prompt", "the prompt is empty");
            if (p.size() > maxContext) throw ApiError.invalid("prompt", "context_length_exceeded", "the prompt has " + p.size() + " ids, more than the " + maxContext + " the server holds per sequence");
            if (p.get(0).isTextual() || p.get(0).isArray()) throw ApiError.invalid("prompt", "one prompt per request: a string or a list of token ids");
            int[] ids = new int[p.size()];
            for (int i = 0; i < ids.length; i++) {
                JsonNode e = p.get(i);
                if (!e.isIntegralNumber() || !e.canConvertToInt()) throw ApiError.invalid("prompt", "prompt[" + i + "] is not a token id: " + e);
                ids[i] = e.asInt();
                if (ids[i] < 0 || ids[i] >= text.vocabulary()) {
                    throw ApiError.invalid("prompt", "invalid_token_id", "prompt[" + i + "] = " + ids[i] + " is not a token id of this model (0 to " + (text.vocabulary() - 1) + ")");
                }
            }
            return ids;
        }
        throw ApiError.invalid("prompt", "prompt must be a string or a list of token ids");
    }

    private static History history(JsonNode msgs) {
        if (msgs == null || !msgs.isArray() || msgs.isEmpty()) throw ApiError.invalid("messages", "messages must be a non-empty list");
        List<History.Message> out = new ArrayList<>();
        for (int i = 0; i < msgs.size(); i++) {
            JsonNode m = msgs.get(i);
            String where = "messages[" + i + "]";
            if (!m.isObject()) throw ApiError.invalid(where, where + " must be an object");
            for (var it = m.fieldNames(); it.hasNext(); ) {
                String f = it.next();
                if (!Set.of("role", "content", "name", "reasoning_content").contains(f)) throw ApiError.invalid(where + "." + f, "unknown field " + where + "." + f);
            }
            String role = m.path("role").asText("");
            String content = content(m.get("content"), where);
            History.Role r = switch (role) {
                case "system", "developer" -> History.Role.SYSTEM;
                case "user" -> History.Role.USER;
                case "assistant" -> History.Role.ASSISTANT;
                default -> throw ApiError.invalid(where + ".role", "role must be system, user or assistant, not '" + role + "'");
            };
            String reasoning = r == History.Role.ASSISTANT && m.hasNonNull("reasoning_content") ? m.get("reasoning_content").asText() : null;
            try {
                out.add(new History.Message(r, content, reasoning));
            } catch (RuntimeException e) {
                throw ApiError.invalid(where, e.getMessage());
            }
        }
        if (out.get(out.size() - 1).role() != History.Role.USER) throw ApiError.invalid("messages", "the last message must be the user's");
        try {
            return new History(out);
        } catch (RuntimeException e) {
            throw ApiError.invalid("messages", e.getMessage());
        }
    }

    private static String content(JsonNode c, String where) {
        if (c == null || c.isNull()) throw ApiError.invalid(where + ".content", where + ".content is required");
        if (c.isTextual()) return c.asText();
        if (c.isArray()) {
            StringBuilder s = new StringBuilder();
            for (JsonNode part : c) {
                if (!part.isObject() || !"text".equals(part.path("type").asText()) || !part.path("text").isTextual()) {
                    throw ApiError.invalid(where + ".content", "only text content parts are supported");
                }
                s.append(part.get("text").asText());
            }
            return s.toString();
        }
        throw ApiError.invalid(where + ".content", where + ".content must be a string or a list of text parts");
    }

    private static Thinking thinking(JsonNode b) {
        JsonNode e = b.get("reasoning_effort");
        if (e == null || e.isNull()) return Thinking.OFF;
        String v = e.asText("");
        return switch (v) {
            case "none" -> Thinking.OFF;
            case "low", "high", "max" -> new Thinking(true, v);
            case "medium" -> new Thinking(true, "high");
            default -> throw ApiError.invalid("reasoning_effort", "reasoning_effort must be none, low, medium, high or max, not '" + v + "'");
        };
    }

    private static List<String> stops(JsonNode s) {
        if (s == null || s.isNull()) return List.of();
        List<String> out = new ArrayList<>();
        if (s.isTextual()) out.add(s.asText());
        else if (s.isArray()) {
            for (JsonNode e : s) {
                if (!e.isTextual()) throw ApiError.invalid("stop", "stop must be a string or a list of strings");
                out.add(e.asText());
            }
        } else throw ApiError.invalid("stop", "stop must be a string or a list of strings");
        if (out.size() > MAX_STOPS) throw ApiError.invalid("stop", "at most " + MAX_STOPS + " stop strings");
        for (String x : out) {
            if (x.isEmpty() || x.length() > MAX_STOP_CHARS) throw ApiError.invalid("stop", "a stop string must have 1 to " + MAX_STOP_CHARS + " characters");
        }
        return List.copyOf(out);
    }

    private static int integer(JsonNode b, String f, int min, int max, int dflt) {
        JsonNode n = b.get(f);
        if (n == null || n.isNull()) return dflt;
        if (!n.isIntegralNumber() || !n.canConvertToInt()) throw ApiError.invalid(f, f + " must be an integer");
        int v = n.asInt();
        if (v < min || v > max) throw ApiError.invalid(f, f + " must be " + (max == Integer.MAX_VALUE ? "at least " + min : min + " to " + max) + ", not " + v);
        return v;
    }

    private static long longValue(JsonNode b, String f) {
        JsonNode n = b.get(f);
        if (!n.isIntegralNumber() || !n.canConvertToLong()) throw ApiError.invalid(f, f + " must be an integer");
        return n.asLong();
    }

    private static double number(JsonNode b, String f, double min, double max, double dflt) {
        JsonNode n = b.get(f);
        if (n == null || n.isNull()) return dflt;
        if (!n.isNumber()) throw ApiError.invalid(f, f + " must be a number");
        double v = n.asDouble();
        if (!(v >= min && v <= max)) throw ApiError.invalid(f, f + " must be " + (min == Double.MIN_VALUE ? "above 0" : min) + " to " + max + ", not " + n);
        return v;
    }

    private static boolean bool(JsonNode b, String f, boolean dflt) {
        JsonNode n = b.get(f);
        if (n == null || n.isNull()) return dflt;
        if (!n.isBoolean()) throw ApiError.invalid(f, f + " must be true or false");
        return n.asBoolean();
    }

    private static Set<String> union(Set<String> a, Set<String> b) {
        java.util.HashSet<String> all = new java.util.HashSet<>(a);
        all.addAll(b);
        return Set.copyOf(all);
    }
}
