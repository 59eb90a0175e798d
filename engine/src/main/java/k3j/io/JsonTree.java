package k3j.io;

import com.fasterxml.jackson.core.JacksonException;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.MissingNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;

/**
 * The tree {@link StrictJson#read(byte[])} gives (duplicate keys and text after the root value refused, every value
 * with its JSON type: ints as int, long or big integer nodes, other numbers as double nodes, empty input as the
 * missing node), built from Jackson's streaming parser without a databind mapper, whose set-up (some 400 classes,
 * a date format and its calendar) was a tenth of a small model's run for one 4 KB config.
 */
public final class JsonTree {
    private static final JsonFactory STRICT = JsonFactory.builder().enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION).build();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private JsonTree() {}

    /** Parses {@code bytes}; a duplicate key, trailing text or a syntax error is a JsonParseException whose message names it in words. */
    public static JsonNode read(byte[] bytes) throws IOException {
        try (JsonParser p = STRICT.createParser(bytes)) {
            JsonToken t = p.nextToken();
            if (t == null) return MissingNode.getInstance();
            JsonNode root = value(p, t);
            JsonToken after = p.nextToken();
            if (after != null) throw new JsonParseException(p, "Trailing token (of type " + after + ") found after value", p.currentTokenLocation());
            return root;
        } catch (JacksonException e) {
            throw new JsonParseException(null, plain(e));
        }
    }

    private static JsonNode value(JsonParser p, JsonToken t) throws IOException {
        return switch (t) {
            case START_OBJECT -> {
                ObjectNode o = NODES.objectNode();
                for (JsonToken k = p.nextToken(); k != JsonToken.END_OBJECT; k = p.nextToken()) {
                    String name = p.currentName();
                    o.set(name, value(p, p.nextToken()));
                }
                yield o;
            }
            case START_ARRAY -> {
                ArrayNode a = NODES.arrayNode();
                for (JsonToken v = p.nextToken(); v != JsonToken.END_ARRAY; v = p.nextToken()) a.add(value(p, v));
                yield a;
            }
            case VALUE_STRING -> NODES.textNode(p.getText());
            case VALUE_NUMBER_INT -> switch (p.getNumberType()) {
                case INT -> NODES.numberNode(p.getIntValue());
                case LONG -> NODES.numberNode(p.getLongValue());
                default -> NODES.numberNode(p.getBigIntegerValue());
            };
            case VALUE_NUMBER_FLOAT -> NODES.numberNode(p.getDoubleValue());
            case VALUE_TRUE -> NODES.booleanNode(true);
            case VALUE_FALSE -> NODES.booleanNode(false);
            case VALUE_NULL -> NODES.nullNode();
            default -> throw new JsonParseException(p, "Unexpected token (" + t + ")", p.currentTokenLocation());
        };
    }

    /** What a JSON library refusal means for the file, in words, with where it is. */
    static String plain(com.fasterxml.jackson.core.JacksonException e) {
        String m = e.getOriginalMessage() == null ? "" : e.getOriginalMessage();
        String what;
        String after = "";
        if (m.startsWith("Trailing token")) {
            what = "a second JSON value after the first";
            after = " (the file must hold exactly one JSON value)";
        }
        else if (e instanceof com.fasterxml.jackson.core.exc.StreamConstraintsException && m.contains("nesting depth")) {
            what = "objects and lists nested deeper than " + StreamReadConstraints.DEFAULT_MAX_DEPTH + " levels: refused";
        } else if (e instanceof com.fasterxml.jackson.core.exc.StreamConstraintsException) what = "a value longer than the largest allowed: refused";
        else if (m.contains("'NaN'") || m.contains("'Infinity'") || m.contains("'-Infinity'") || m.contains("'+Infinity'")) {
            what = "NaN or Infinity, which JSON does not allow (a number must be finite)";
        } else if (m.startsWith("Duplicate field")) what = m.lines().findFirst().orElse(m);
        else if (m.contains("end-of-input") || m.contains("Unexpected end")) what = "the JSON ends early (cut short)";
        else if (m.isEmpty() || m.contains("`") || m.contains("com.fasterxml")) what = "not valid JSON";
        else what = "not valid JSON: " + m.lines().findFirst().orElse(m).replaceAll("\\s*\\(code \\d+\\)", "");
        var at = e.getLocation();
        return what + (at == null || at.getLineNr() < 0 ? "" : ", at line " + at.getLineNr() + " column " + at.getColumnNr()) + after;
    }
}
