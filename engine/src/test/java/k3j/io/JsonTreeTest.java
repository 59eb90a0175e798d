package k3j.io;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The streaming tree reader gives what the strict mapper gives, on every checked-in model's config and on hostile text:
 * the same tree with the same node types (an int is not a long, a double not a decimal), the same field order, or the
 * same refusal in the same words at the same place.
 */
class JsonTreeTest {
    static final List<String> HOSTILE = List.of("", "   ", "{}", "[]", "null", "1", "-0", "1.0", "1e400", "-1e-400", "2147483647",
            "2147483648", "-9223372036854775808", "9223372036854775808", "123456789012345678901234567890", "0.1", "\"x\"",
            "{\"a\": 1, \"a\": 2}", "{\"a\": {\"b\": 1, \"b\": 1}}", "{\"a\": 1} {\"b\": 2}", "{\"a\": 1} x", "[1, 2] 3", "{\"a\": 1",
            "{\"a\": [1, 2}", "{\"a\": NaN}", "{\"a\": Infinity}", "{\"a\": -Infinity}", "{\"a\": 01}", "{'a': 1}", "{\"a\": tru}",
            "{\"a\": \"\\u00e9\\ud83d\\ude00\"}", "{\"b\": 1, \"a\": [true, false, null, {}, []]}", "\"unterminated", "{\"a\":1,}",
            "[1,]", "\u00ef\u00bb\u00bf{}", "[" .repeat(1001) + "]".repeat(1001), "[".repeat(999) + "]".repeat(999),
            "{\"x\": " + "9".repeat(1200) + "}", "{\"a\": 1}\n\n  ", "{\"a\": 1}\n/* c */");

    @Test
    void agreesWithTheStrictMapperOnHostileText() throws IOException {
        for (String s : HOSTILE) same(s, s.getBytes(StandardCharsets.UTF_8));
        same("latin-1 byte", new byte[] {'"', (byte) 0xe9, '"'});
    }

    @Test
    void agreesWithTheStrictMapperOnEveryCheckedInConfig() throws IOException {
        List<Path> configs = new ArrayList<>();
        for (String dir : List.of("oracle-fixtures", "reference-dumps")) {
            Path d = Path.of(System.getProperty("k3.root", "..")).resolve(dir);
            if (Files.isDirectory(d)) try (Stream<Path> s = Files.walk(d, 3)) {
                s.filter(p -> p.getFileName().toString().endsWith(".json") && p.toFile().length() < (1 << 20)).forEach(configs::add);
            }
        }
        assertFalse(configs.isEmpty(), "no JSON file found under oracle-fixtures/ or reference-dumps/");
        for (Path p : configs) same(p.toString(), Files.readAllBytes(p));
    }

    private static void same(String what, byte[] bytes) throws IOException {
        JsonNode want = null, got = null;
        String wantErr = null, gotErr = null;
        try {
            want = StrictJson.read(bytes);
        } catch (IOException e) {
            wantErr = e.getClass().getName() + ": " + e.getMessage();
        }
        try {
            got = JsonTree.read(bytes);
        } catch (IOException e) {
            gotErr = e.getClass().getName() + ": " + e.getMessage();
        }
        String label = what.length() > 60 ? what.substring(0, 60) + "..." : what;
        assertEquals(wantErr, gotErr, label);
        if (want != null) sameTree(want, got, label + " at $");
    }

    private static void sameTree(JsonNode want, JsonNode got, String at) {
        assertEquals(want.getClass(), got.getClass(), at);
        assertEquals(want, got, at);
        if (want.isObject()) {
            Iterator<Map.Entry<String, JsonNode>> a = want.properties().iterator(), b = got.properties().iterator();
            while (a.hasNext()) {
                Map.Entry<String, JsonNode> x = a.next(), y = b.next();
                assertEquals(x.getKey(), y.getKey(), at + " (field order)");
                sameTree(x.getValue(), y.getValue(), at + "." + x.getKey());
            }
        } else if (want.isArray()) {
            for (int i = 0; i < want.size(); i++) sameTree(want.get(i), got.get(i), at + "[" + i + "]");
        }
    }
}
