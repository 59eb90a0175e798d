package k3j.provider;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import k3j.io.SafeFiles;
import k3j.io.StrictJson;

/**
 * What a hosted, OpenAI-compatible API answered, with logprobs (docs/formats.md §10), recognised by its content: a chat
 * completion ({@code choices[0].logprobs.content[]} of {@code token}, {@code logprob}, {@code bytes},
 * {@code top_logprobs}) or a legacy completion ({@code choices[0].logprobs.tokens}, {@code token_logprobs},
 * {@code top_logprobs} as token → logprob objects). Read strictly: a duplicate key, a missing field, a non-finite or
 * positive logprob, a token listed twice among the alternatives, alternatives out of order or whose probabilities sum
 * past 1, a token string that is not its bytes, usage counts below 0 or that disagree with the entries, or a chosen
 * token whose logprob contradicts its own entry among the alternatives is refused, naming the place.
 *
 * @param form          "chat" or "completions"
 * @param tokens        the completion, in order
 * @param promptTokens  the prompt length the provider reports ({@code usage.prompt_tokens}), or -1 when it reports none
 */
public record ProviderResponse(Path source, String form, List<Token> tokens, int promptTokens) {
    /** Larger than any response with logprobs for a run's 36,864 positions and 20 alternatives each. */
    public static final long MAX_BYTES = 256L << 20;
    /** At most this many completion tokens (the run's positions) and alternatives per token. */
    public static final int MAX_TOKENS = 36864, MAX_TOP = 64;
    /** How far a chosen token's logprob may differ from its own entry among the alternatives (providers print both from one float). */
    static final double SELF_TOLERANCE = 1e-4;

    /** One token as the provider printed it: its bytes and its logprob. */
    public record Choice(byte[] bytes, double logprob) {
        /** The token's text for messages: UTF-8 when it is, else its bytes in hex. */
        public String shown() {
            String s = new String(bytes, StandardCharsets.UTF_8);
            return Arrays.equals(s.getBytes(StandardCharsets.UTF_8), bytes) ? "'" + s + "'" : "bytes " + HexFormat.ofDelimiter(" ").formatHex(bytes);
        }
    }

    /** One completion position: the token the provider chose, and its top alternatives (most likely first as listed). */
    public record Token(Choice chosen, List<Choice> top) {}

    /** A provider response that cannot be graded, with the reason. */
    public static final class RefusedException extends RuntimeException {
        public RefusedException(String message) {
            super(message);
        }
    }

    /** NaN and Infinity are read as numbers so that they are refused by name, not as a syntax error. */
    private static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS)
            .build();

    /** Whether {@code path} is meant as a provider response: a regular .json file (its form is then told by its content). */
    public static boolean isResponseName(Path path) {
        return path.getFileName() != null && path.getFileName().toString().endsWith(".json") && Files.isRegularFile(path);
    }

    public static ProviderResponse read(Path path) {
        try {
            return parse(SafeFiles.readAll(path, MAX_BYTES, "a provider response"), path);
        } catch (IOException e) {
            throw new RefusedException(path + ": " + SafeFiles.why(e));
        }
    }

    /** A response body received over HTTP rather than read from a file; {@code source} names it in refusals (a path-like label). */
    public static ProviderResponse parse(byte[] body, Path source) {
        if (body.length > MAX_BYTES) throw new RefusedException(source + ": " + body.length + " bytes, more than " + MAX_BYTES);
        JsonNode root;
        try {
            root = StrictJson.read(MAPPER, body);
        } catch (IOException e) {
            throw new RefusedException(source + ": " + SafeFiles.why(e));
        }
        Path path = source;
        String w = path.toString();
        Function<String, RuntimeException> fail = RefusedException::new;
        if (root == null || !root.isObject()) throw fail.apply(w + " is not a JSON object");
        JsonNode choices = StrictJson.array(root, "choices", w, fail);
        if (choices.size() != 1) throw fail.apply(w + " holds " + choices.size() + " choices; a graded response holds exactly one (ask with n=1)");
        JsonNode c = choices.get(0);
        JsonNode lp = c.get("logprobs");
        if (lp == null || lp.isNull()) {
            throw fail.apply(w + " choices[0] has no logprobs: ask with \"logprobs\": true, \"top_logprobs\": 5 (chat) or \"logprobs\": 5 (completions)");
        }
        if (!lp.isObject()) throw fail.apply(w + " choices[0].logprobs is " + StrictJson.describe(lp) + ", must be an object");
        boolean chat = lp.has("content"), legacy = lp.has("tokens");
        if (chat == legacy) {
            throw fail.apply(w + " choices[0].logprobs holds " + (chat ? "both content and tokens" : "neither content[] (chat) nor tokens[] (completions)"));
        }
        List<Token> tokens = chat ? chat(lp, w + " choices[0].logprobs") : legacy(lp, w + " choices[0].logprobs");
        if (tokens.isEmpty()) throw fail.apply(w + " has no completion token to grade");
        int promptTokens = usage(root.get("usage"), tokens.size(), w);
        return new ProviderResponse(path, chat ? "chat" : "completions", List.copyOf(tokens), promptTokens);
    }

    /**
     * usage read against the entries: counts are whole numbers not below 0, completion_tokens (less any reasoning_tokens
     * the provider says carry no logprobs) is the number of entries, total_tokens their sum. The prompt length, or -1 when
     * the provider reports none.
     */
    private static int usage(JsonNode usage, int entries, String w) {
        Function<String, RuntimeException> fail = RefusedException::new;
        if (usage == null || usage.isNull()) return -1;
        if (!usage.isObject()) throw fail.apply(w + " usage is " + StrictJson.describe(usage) + ", must be an object");
        int prompt = count(usage, "prompt_tokens", w + " usage"), completion = count(usage, "completion_tokens", w + " usage"),
                total = count(usage, "total_tokens", w + " usage"), reasoning = -1;
        JsonNode details = usage.get("completion_tokens_details");
        if (details != null && !details.isNull()) {
            if (!details.isObject()) throw fail.apply(w + " usage.completion_tokens_details is " + StrictJson.describe(details) + ", must be an object");
            reasoning = count(details, "reasoning_tokens", w + " usage.completion_tokens_details");
        }
        if (completion >= 0) {
            int logged = completion - Math.max(reasoning, 0);
            if (logged != entries) {
                throw fail.apply(w + " usage.completion_tokens is " + completion + (reasoning > 0 ? " (" + reasoning + " of them reasoning)" : "") + ", beside "
                        + entries + " logprob entries: the response contradicts itself");
            }
        }
        if (total >= 0 && prompt >= 0 && completion >= 0 && (long) prompt + completion != total) {
            throw fail.apply(w + " usage.total_tokens is " + total + ", not prompt_tokens " + prompt + " + completion_tokens " + completion + ": the response contradicts itself");
        }
        return prompt;
    }

    /** A usage count: absent (-1) or a whole number, never below 0. */
    private static int count(JsonNode o, String key, String w) {
        Function<String, RuntimeException> fail = RefusedException::new;
        JsonNode v = o.get(key);
        if (v == null || v.isNull()) return -1;
        int n = StrictJson.int32(v, w + "." + key, fail);
        if (n < 0) throw fail.apply(w + "." + key + " = " + n + " is below 0: no count is negative");
        return n;
    }

    private static List<Token> chat(JsonNode lp, String w) {
        Function<String, RuntimeException> fail = RefusedException::new;
        JsonNode content = StrictJson.array(lp, "content", w, fail);
        checkCount(content.size(), w + ".content");
        List<Token> out = new ArrayList<>(content.size());
        for (int i = 0; i < content.size(); i++) {
            String at = w + ".content[" + i + "]";
            JsonNode t = content.get(i);
            if (!t.isObject()) throw fail.apply(at + " is " + StrictJson.describe(t) + ", must be an object");
            JsonNode top = StrictJson.array(t, "top_logprobs", at, fail);
            List<Choice> alts = new ArrayList<>(top.size());
            for (int j = 0; j < top.size(); j++) {
                JsonNode a = top.get(j);
                String aw = at + ".top_logprobs[" + j + "]";
                if (!a.isObject()) throw fail.apply(aw + " is " + StrictJson.describe(a) + ", must be an object");
                Choice alt = chatChoice(a, aw);
                if (j > 0 && alt.logprob() > alts.get(j - 1).logprob() + SELF_TOLERANCE) {
                    throw fail.apply(aw + " (logprob " + alt.logprob() + ") is listed after a less likely one (" + alts.get(j - 1).logprob()
                            + "): top_logprobs are most likely first; the response is out of order");
                }
                alts.add(alt);
            }
            out.add(token(chatChoice(t, at), alts, at));
        }
        return out;
    }

    /** {@code bytes} when the provider gives them (the exact token), else the token's text. */
    private static Choice chatChoice(JsonNode o, String w) {
        Function<String, RuntimeException> fail = RefusedException::new;
        String text = StrictJson.text(o, "token", w, fail);
        JsonNode b = o.get("bytes");
        byte[] bytes;
        if (b == null || b.isNull()) {
            bytes = tokenBytes(text, w + ".token");
        } else {
            if (!b.isArray()) throw fail.apply(w + ".bytes is " + StrictJson.describe(b) + ", must be a list of byte values");
            bytes = new byte[b.size()];
            for (int k = 0; k < bytes.length; k++) {
                int v = StrictJson.int32(b.get(k), w + ".bytes[" + k + "]", fail);
                if (v < 0 || v > 255) throw fail.apply(w + ".bytes[" + k + "] = " + v + " is not a byte value 0..255");
                bytes[k] = (byte) v;
            }
            agree(text, bytes, w);
        }
        return new Choice(bytes, logprob(o.get("logprob"), w + ".logprob"));
    }

    /**
     * A token's printed string against its bytes: the string the bytes are (when they are UTF-8), their bytes:\xNN
     * form, or (bytes that are not UTF-8 on their own) a string with the replacement character where they could not be
     * printed, or vLLM's {@code token_id:N} (its --return-tokens-as-token-ids: the string names the id, not the text;
     * the id is checked against the vocabulary where it is mapped). Anything else contradicts itself: refused.
     */
    private static final java.util.regex.Pattern TOKEN_ID = java.util.regex.Pattern.compile("token_id:\\d{1,9}");

    private static void agree(String text, byte[] bytes, String w) {
        if (TOKEN_ID.matcher(text).matches()) return;
        java.nio.charset.CharsetDecoder d = StandardCharsets.UTF_8.newDecoder();
        String decoded;
        try {
            decoded = d.decode(java.nio.ByteBuffer.wrap(bytes)).toString();
        } catch (java.nio.charset.CharacterCodingException e) {
            decoded = null;
        }
        if (decoded != null ? text.equals(decoded) : text.indexOf('\uFFFD') >= 0) return;
        if (text.startsWith("bytes:")) {
            try {
                if (Arrays.equals(tokenBytes(text, w + ".token"), bytes)) return;
            } catch (RefusedException e) {
                // not the bytes form: refused below as a contradiction
            }
        }
        throw new RefusedException(w + ": token \"" + text + "\" and its bytes " + HexFormat.ofDelimiter(" ").formatHex(bytes)
                + (decoded != null ? " (\"" + decoded + "\")" : " (not UTF-8)") + " disagree: the response contradicts itself");
    }

    private static List<Token> legacy(JsonNode lp, String w) {
        Function<String, RuntimeException> fail = RefusedException::new;
        JsonNode tokens = StrictJson.array(lp, "tokens", w, fail), lps = StrictJson.array(lp, "token_logprobs", w, fail),
                tops = StrictJson.array(lp, "top_logprobs", w, fail);
        checkCount(tokens.size(), w + ".tokens");
        if (lps.size() != tokens.size() || tops.size() != tokens.size()) {
            throw fail.apply(w + " lists " + tokens.size() + " tokens, " + lps.size() + " token_logprobs and " + tops.size() + " top_logprobs: one of each per token");
        }
        List<Token> out = new ArrayList<>(tokens.size());
        for (int i = 0; i < tokens.size(); i++) {
            JsonNode t = tokens.get(i);
            if (!t.isTextual()) throw fail.apply(w + ".tokens[" + i + "] is " + StrictJson.describe(t) + ", must be a string");
            Choice chosen = new Choice(tokenBytes(t.textValue(), w + ".tokens[" + i + "]"), logprob(lps.get(i), w + ".token_logprobs[" + i + "]"));
            JsonNode top = tops.get(i);
            String tw = w + ".top_logprobs[" + i + "]";
            if (!top.isObject()) throw fail.apply(tw + " is " + StrictJson.describe(top) + ", must be an object of token: logprob");
            List<Choice> alts = new ArrayList<>(top.size());
            for (Iterator<Map.Entry<String, JsonNode>> it = top.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                alts.add(new Choice(tokenBytes(e.getKey(), tw + " key \"" + e.getKey() + "\""), logprob(e.getValue(), tw + "[\"" + e.getKey() + "\"]")));
            }
            out.add(token(chosen, alts, w + " token " + i));
        }
        return out;
    }

    private static void checkCount(int n, String w) {
        if (n > MAX_TOKENS) throw new RefusedException(w + " lists " + n + " tokens, more than the " + MAX_TOKENS + " positions a run holds");
    }

    /**
     * A token's bytes from its printed text: {@code bytes:\xNN...} (how providers print a token that is not UTF-8 on
     * its own) as those bytes, else the text's UTF-8. A replacement character stands for bytes the provider lost: refused.
     */
    static byte[] tokenBytes(String text, String w) {
        if (text.startsWith("bytes:")) {
            String hex = text.substring(6);
            if (hex.isEmpty() || hex.length() % 4 != 0) throw new RefusedException(w + " \"" + text + "\" is not bytes:\\xNN...");
            byte[] b = new byte[hex.length() / 4];
            for (int k = 0; k < b.length; k++) {
                String part = hex.substring(4 * k, 4 * k + 4);
                if (!part.startsWith("\\x") || !HexFormat.isHexDigit(part.charAt(2)) || !HexFormat.isHexDigit(part.charAt(3))) {
                    throw new RefusedException(w + " \"" + text + "\" is not bytes:\\xNN...");
                }
                b[k] = (byte) HexFormat.fromHexDigits(part, 2, 4);
            }
            return b;
        }
        if (text.indexOf('\uFFFD') >= 0) {
            throw new RefusedException(w + " \"" + text + "\" holds a replacement character: the provider printed bytes it could not decode; "
                    + "ask for the chat form, whose bytes[] are exact");
        }
        return text.getBytes(StandardCharsets.UTF_8);
    }

    /** A logprob: a finite number, not above 0 (a probability is at most 1; 1e-6 allows the provider's rounding). */
    private static double logprob(JsonNode v, String w) {
        if (v == null || v.isNull()) throw new RefusedException(w + " is missing");
        if (!v.isNumber()) throw new RefusedException(w + " is " + StrictJson.describe(v) + ", must be a number");
        double x = v.doubleValue();
        if (!Double.isFinite(x)) throw new RefusedException(w + " is " + v.asText() + ": a logprob must be a finite number");
        if (x > 1e-6) throw new RefusedException(w + " = " + x + " is above 0: no probability exceeds 1");
        return x;
    }

    /** The checks that tie one position together: alternatives present and distinct, at most probability 1, the chosen token consistent with them. */
    private static Token token(Choice chosen, List<Choice> alts, String w) {
        if (alts.isEmpty()) throw new RefusedException(w + " lists no top_logprobs: ask with top_logprobs >= 1 (chat) or logprobs >= 1 (completions)");
        if (alts.size() > MAX_TOP) throw new RefusedException(w + " lists " + alts.size() + " alternatives, more than " + MAX_TOP);
        double mass = 0, lowest = 0;
        for (int j = 0; j < alts.size(); j++) {
            Choice a = alts.get(j);
            for (int k = 0; k < j; k++) {
                if (Arrays.equals(alts.get(k).bytes(), a.bytes())) throw new RefusedException(w + " lists " + a.shown() + " twice among its top_logprobs");
            }
            mass += Math.exp(a.logprob());
            lowest = j == 0 ? a.logprob() : Math.min(lowest, a.logprob());
        }
        if (mass > 1 + 1e-3) throw new RefusedException(w + ": its top_logprobs sum to probability " + mass + ", more than 1");
        Choice own = alts.stream().filter(a -> Arrays.equals(a.bytes(), chosen.bytes())).findFirst().orElse(null);
        if (own != null && Math.abs(own.logprob() - chosen.logprob()) > SELF_TOLERANCE) {
            throw new RefusedException(w + ": the chosen token " + chosen.shown() + " has logprob " + chosen.logprob() + ", and " + own.logprob()
                    + " among the top_logprobs: the response contradicts itself");
        }
        if (own == null && chosen.logprob() > lowest + SELF_TOLERANCE) {
            throw new RefusedException(w + ": the chosen token " + chosen.shown() + " (logprob " + chosen.logprob() + ") is more likely than a listed top_logprob ("
                    + lowest + ") but not listed: the response contradicts itself");
        }
        return new Token(chosen, List.copyOf(alts));
    }
}
