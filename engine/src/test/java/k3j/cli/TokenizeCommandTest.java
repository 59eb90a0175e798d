package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import k3j.Repo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenizeCommandTest {
    private static final String TINY = Repo.path("oracle-fixtures/tiny-k3").toString();

    @Test
    void encodesAndDecodesBack(@TempDir Path dir) throws Exception {
        Path text = dir.resolve("in.txt"), ids = dir.resolve("ids.txt"), back = dir.resolve("back.txt");
        byte[] bytes = "hé<|open|>".getBytes(StandardCharsets.UTF_8);
        Files.write(text, bytes);
        CliRun r = CliRun.k3("tokenize", "--tok", TINY, "--file", text.toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals("104,195,169,253\n", r.out());
        CliRun plain = CliRun.k3("tokenize", "--tok", TINY, "--no-specials", "--file", text.toString());
        assertEquals("104,195,169,60,124,111,112,101,110,124,62\n", plain.out());
        Files.writeString(ids, r.out());
        assertEquals(0, CliRun.k3("tokenize", "--tok", TINY, "--decode", "--file", ids.toString(), "--output", back.toString()).exit());
        assertArrayEquals(bytes, Files.readAllBytes(back));
    }

    @Test
    void refusesUnknownIdsAndMissingTokenizers(@TempDir Path dir) throws Exception {
        Path ids = dir.resolve("ids.txt");
        Files.writeString(ids, "1,2,999");
        CliRun r = CliRun.k3("tokenize", "--tok", TINY, "--decode", "--file", ids.toString());
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("id 999 is outside"), r.err());
        CliRun missing = CliRun.k3("tokenize", "--tok", dir.toString(), "--file", ids.toString());
        assertEquals(1, missing.exit());
        assertTrue(missing.err().contains("tiktoken.model: missing"), missing.err());
    }
}
