package k3j.tokenizer;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParseException;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

/**
 * The added tokens of a {@code tokenizer_config.json} (docs/formats.md): only {@code added_tokens_decoder} is
 * read, an object from decimal id to {@code {"content": string, "special": bool, ...}}. Ids must lie in the
 * {@value #RESERVED} reserved ids above the byte-level vocabulary, each id and each content once; a reserved
 * id the file does not name is {@code <|reserved_token_ID|>}. Refusals name {@code file:line}.
 */
public final class AddedTokens {
    /** Ids reserved above the last rank. */
    public static final int RESERVED = 256;
    /** A tokenizer_config.json larger than this is not one (Kimi's is about 10 KB): refused unread. */
    static final long MAX_FILE = 16L << 20;

    private AddedTokens() {}

    /** Every reserved id's token, in id order, for a vocabulary of {@code nBase} ranks. */
    public static AddedToken[] read(Path file, int nBase) {
        Map<Integer, AddedToken> named = new TreeMap<>();
        Map<String, Integer> contents = new HashMap<>();
        String name = file.toString();
        byte[] bytes;
        try {
            bytes = k3j.io.SafeFiles.readAll(file, MAX_FILE, "a tokenizer_config.json");
        } catch (java.io.IOException e) {
            throw new TokenizerException(k3j.io.SafeFiles.why(e), e);
        }
        try (JsonParser p = new JsonFactory().createParser(bytes)) {
            if (p.nextToken() != JsonToken.START_OBJECT) throw bad(name, p, "the file must be one JSON object");
            boolean seen = false;
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken v = p.nextToken();
                if (!field.equals("added_tokens_decoder")) {
                    p.skipChildren();
                    continue;
                }
                if (seen) throw bad(name, p, "added_tokens_decoder given twice");
                seen = true;
                if (v != JsonToken.START_OBJECT) throw bad(name, p, "added_tokens_decoder must be an object");
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    AddedToken t = entry(p, name, nBase);
                    if (named.put(t.id(), t) != null) throw bad(name, p, "id " + t.id() + " given twice");
                    Integer other = contents.put(t.content(), t.id());
                    if (other != null) throw bad(name, p, "content '" + t.content() + "' given to ids " + other + " and " + t.id());
                }
            }
            if (p.nextToken() != null) throw bad(name, p, "data after the JSON object");
            if (!seen) throw new TokenizerException(name + ": no added_tokens_decoder object");
        } catch (JsonParseException e) {
            throw new TokenizerException(name + ":" + e.getLocation().getLineNr() + ": not JSON: " + e.getOriginalMessage(), e);
        } catch (IOException e) {
            throw new TokenizerException(name + ": cannot read: " + e.getMessage(), e);
        }
        AddedToken[] all = new AddedToken[RESERVED];
        for (int i = 0; i < RESERVED; i++) {
            int id = nBase + i;
            AddedToken t = named.get(id);
            if (t == null) {
                String reserved = "<|reserved_token_" + id + "|>";
                if (contents.containsKey(reserved)) throw new TokenizerException(name + ": '" + reserved + "' names id " + contents.get(reserved) + ", not " + id);
                t = new AddedToken(id, reserved, true);
            }
            all[i] = t;
        }
        return all;
    }

    private static AddedToken entry(JsonParser p, String name, int nBase) throws IOException {
        String key = p.currentName();
        int id;
        try {
            if (!key.matches("0|[1-9][0-9]{0,8}")) throw new NumberFormatException();
            id = Integer.parseInt(key);
        } catch (NumberFormatException e) {
            throw bad(name, p, "key '" + key + "' is not a decimal id");
        }
        if (id < nBase || id >= nBase + RESERVED) {
            throw bad(name, p, "id " + id + " outside the reserved ids [" + nBase + ", " + (nBase + RESERVED) + ") above the " + nBase + " ranks");
        }
        if (p.nextToken() != JsonToken.START_OBJECT) throw bad(name, p, "id " + id + ": the value must be an object");
        String content = null;
        boolean special = false;
        while (p.nextToken() == JsonToken.FIELD_NAME) {
            String f = p.currentName();
            JsonToken v = p.nextToken();
            switch (f) {
                case "content" -> {
                    if (v != JsonToken.VALUE_STRING) throw bad(name, p, "id " + id + ": content must be a string");
                    content = p.getText();
                }
                case "special" -> {
                    if (v != JsonToken.VALUE_TRUE && v != JsonToken.VALUE_FALSE) throw bad(name, p, "id " + id + ": special must be true or false");
                    special = v == JsonToken.VALUE_TRUE;
                }
                default -> p.skipChildren();
            }
        }
        if (content == null) throw bad(name, p, "id " + id + ": no content");
        if (content.isEmpty()) throw bad(name, p, "id " + id + ": empty content");
        // a lone surrogate (a \\uD800 escape without its pair) is no text: it has no UTF-8 bytes to match or print
        if (content.codePoints().anyMatch(cp -> cp >= Character.MIN_SURROGATE && cp <= Character.MAX_SURROGATE)) throw bad(name, p, "id " + id + ": content holds an unpaired surrogate (a \\uD800-\\uDFFF escape without its pair)");
        return new AddedToken(id, content, special);
    }

    private static TokenizerException bad(String name, JsonParser p, String reason) {
        return new TokenizerException(name + ":" + p.currentLocation().getLineNr() + ": " + reason);
    }
}
