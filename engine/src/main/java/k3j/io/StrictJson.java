package k3j.io;

import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import java.io.IOException;
import java.util.function.Function;

/**
 * JSON read as data, not as a suggestion: one mapper for every manifest, config and index the engine reads, which
 * refuses a key given twice ({@code {"format_version": 1, "format_version": 2}}) and any text after the root value;
 * and typed look-ups that refuse a value of the wrong JSON type ({@code "1"}, {@code true} or {@code 1.9} where an
 * integer belongs) naming the key, instead of coercing it. Jackson's tree keeps every value's JSON type, so a
 * look-up here sees exactly what the file says.
 *
 * <p>Each look-up takes the path of the object in messages ({@code "manifest layers[40]"}) and a function that
 * turns a message into the caller's exception, so a dump refusal stays a reference mismatch and a config refusal a
 * config error.
 */
public final class StrictJson {
    /** Duplicate keys and trailing tokens refused; numbers kept as written (no float-to-int coercion in a tree). */
    public static final ObjectMapper MAPPER = JsonMapper.builder()
            .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .build();

    private StrictJson() {}

    /** Parses {@code bytes}; a duplicate key, trailing text or a syntax error is an IOException whose message names it. */
    public static JsonNode read(byte[] bytes) throws IOException {
        return read(MAPPER, bytes);
    }

    /**
     * Parses {@code bytes} with {@code mapper}; any refusal is a JsonParseException in plain words, with the line and column:
     * never the JSON library's own (its class names, settings and limits are not the file's fault).
     */
    public static JsonNode read(ObjectMapper mapper, byte[] bytes) throws IOException {
        try {
            return mapper.readTree(bytes);
        } catch (com.fasterxml.jackson.core.JacksonException e) {
            // still a JSON refusal (callers tell it from a failed read), its message in words
            throw new com.fasterxml.jackson.core.JsonParseException(null, plain(e));
        }
    }

    /** What a JSON library refusal means for the file, in words, with where it is ({@link JsonTree#plain}). */
    static String plain(com.fasterxml.jackson.core.JacksonException e) {
        return JsonTree.plain(e);
    }

    /** A required member of {@code obj}: present and not null. */
    public static JsonNode need(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = obj == null ? null : obj.get(key);
        if (v == null || v.isNull()) throw fail.apply(where + " has no " + key);
        return v;
    }

    /** An integer: a JSON integral number in range (not a string, a boolean or a number with a fraction or exponent). */
    public static long integer(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        return integer(need(obj, key, where, fail), where + "." + key, fail);
    }

    /** {@code v} (at {@code what}) as an integer, refused when it is not a JSON integer that fits a long. */
    public static long integer(JsonNode v, String what, Function<String, RuntimeException> fail) {
        if (!v.isIntegralNumber() || !v.canConvertToLong()) throw fail.apply(what + " is " + describe(v) + ", must be an integer");
        return v.longValue();
    }

    /** An int: an integer that fits 32 bits. */
    public static int int32(JsonNode v, String what, Function<String, RuntimeException> fail) {
        long x = integer(v, what, fail);
        if (x != (int) x) throw fail.apply(what + " = " + x + " does not fit an int");
        return (int) x;
    }

    /** A finite number (integral or not). */
    public static double number(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = need(obj, key, where, fail);
        if (!v.isNumber() || !Double.isFinite(v.doubleValue())) throw fail.apply(where + "." + key + " is " + describe(v) + ", must be a finite number");
        return v.doubleValue();
    }

    /** A string. */
    public static String text(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = need(obj, key, where, fail);
        if (!v.isTextual()) throw fail.apply(where + "." + key + " is " + describe(v) + ", must be a string");
        return v.textValue();
    }

    /** A boolean (not 0/1, not "true"). */
    public static boolean bool(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = need(obj, key, where, fail);
        if (!v.isBoolean()) throw fail.apply(where + "." + key + " is " + describe(v) + ", must be true or false");
        return v.booleanValue();
    }

    /** An object member (present). */
    public static JsonNode object(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = need(obj, key, where, fail);
        if (!v.isObject()) throw fail.apply(where + "." + key + " is " + describe(v) + ", must be an object");
        return v;
    }

    /** An array member (present). */
    public static JsonNode array(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode v = need(obj, key, where, fail);
        if (!v.isArray()) throw fail.apply(where + "." + key + " is " + describe(v) + ", must be a list");
        return v;
    }

    /** An array of ints. */
    public static int[] ints(JsonNode obj, String key, String where, Function<String, RuntimeException> fail) {
        JsonNode a = array(obj, key, where, fail);
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) out[i] = int32(a.get(i), where + "." + key + "[" + i + "]", fail);
        return out;
    }

    /** "the string \"1\"", "true", "the number 1.9", "an object": what a value is, for messages. */
    public static String describe(JsonNode v) {
        if (v == null || v.isMissingNode()) return "missing";
        if (v.isNull()) return "null";
        if (v.isTextual()) return "the string \"" + (v.textValue().length() > 40 ? v.textValue().substring(0, 40) + "..." : v.textValue()) + "\"";
        if (v.isBoolean()) return v.asText();
        if (v.isNumber()) return "the number " + v.asText();
        if (v.isArray()) return "a list";
        return "an object";
    }
}
