package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.StreamSupport;
import k3j.Repo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The run command with text: --tok/--prompt, sampling, --save-state/--load-state, --chat with a prompt, and their refusals. */
class RunTextTest {
    private static final String TINY = Repo.path("oracle-fixtures/tiny-k3").toString();

    private static JsonNode json(Path p) throws Exception {
        return new ObjectMapper().readTree(p.toFile());
    }

    private static String ids(JsonNode a) {
        return String.join(",", StreamSupport.stream(a.spliterator(), false).map(JsonNode::asText).toList());
    }

    @Test
    void promptTextGivesGeneratedText(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("r.json");
        CliRun r = CliRun.k3("run", TINY, "--tok", TINY, "--prompt", "hello", "--gen", "2", "--incremental", "--out", out.toString());
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.err().contains("generated text: "), r.err());
        assertEquals("104,101,108,108,111", ids(json(out).path("prompt_ids")));
        assertTrue(json(out).path("generated_text").isTextual());
    }

    @Test
    void refusesTextWithoutTokenizerAndStateWithoutIncremental(@TempDir Path dir) throws Exception {
        Path bare = dir.resolve("bare");   // tiny-k3 without its tokenizer
        Files.createDirectories(bare);
        try (var files = Files.list(Path.of(TINY))) {
            for (Path f : files.toList()) {
                String n = f.getFileName().toString();
                if (n.equals("config.json") || n.startsWith("model")) Files.copy(f, bare.resolve(n));
            }
        }
        CliRun r = CliRun.k3("run", bare.toString(), "--prompt", "hello");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("--prompt needs --tok DIR") && r.err().contains("holds no tiktoken.model"), r.err());
        r = CliRun.k3("run", TINY, "--ids", "1,2", "--save-state", dir.resolve("s").toString(), "--recompute");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("--save-state needs incremental decoding, not --recompute"), r.err());
        r = CliRun.k3("run", TINY, "--ids", "1,2", "--recompute", "--incremental");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("--recompute and --incremental are mutually exclusive"), r.err());
        r = CliRun.k3("run", TINY, "--tok", TINY, "--chat", "--effort", "medium", "--prompt", "x");
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("medium"), r.err());
    }

    @Test
    void aLoadedStateContinuesLikeOneLongerRun(@TempDir Path dir) throws Exception {
        Path state = dir.resolve("s.k3state"), a = dir.resolve("a.json"), b = dir.resolve("b.json"), whole = dir.resolve("w.json");
        String sample = "--temperature=0.9";
        CliRun first = CliRun.k3("run", TINY, "--ids", "250,17,101", "--gen", "3", "--incremental", sample, "--seed", "5", "--save-state", state.toString(), "--out", a.toString());
        assertEquals(0, first.exit(), first.err());
        CliRun next = CliRun.k3("run", TINY, "--ids", "42,7", "--gen", "3", "--incremental", "--load-state", state.toString(), "--out", b.toString());
        assertEquals(0, next.exit(), next.err());
        assertTrue(next.err().contains("resumed 5 positions"), next.err());
        String all = "250,17,101," + ids(json(a).path("generated_ids")) + ",42,7";
        CliRun once = CliRun.k3("run", TINY, "--ids", all, "--gen", "3", "--incremental", "--out", whole.toString());
        assertEquals(0, once.exit(), once.err());
        assertEquals(ids(json(whole).path("generated_ids")), ids(json(b).path("generated_ids")), "continuing from the state = one run over everything");
    }

    @Test
    void chatTurnsResumeFromTheSavedState(@TempDir Path dir) throws Exception {
        Path h = dir.resolve("h.jsonl"), s = dir.resolve("s.k3state");
        CliRun one = CliRun.k3("run", TINY, "--tok", TINY, "--chat", "--think", "off", "--system", "be brief", "--prompt", "hello", "--history", h.toString(),
                "--save-state", s.toString(), "--gen", "4");
        assertEquals(0, one.exit(), one.err());
        CliRun two = CliRun.k3("run", TINY, "--tok", TINY, "--chat", "--think", "off", "--prompt", "again", "--history", h.toString(), "--load-state", s.toString(),
                "--save-state", s.toString(), "--gen", "4");
        assertEquals(0, two.exit(), two.err());
        assertTrue(two.err().contains("resumed"), two.err());
        assertEquals(5, Files.readAllLines(h).size(), "system, user, assistant, user, assistant");
        Files.writeString(h, Files.readString(h).replace("again", "other"));
        CliRun wrong = CliRun.k3("run", TINY, "--tok", TINY, "--chat", "--think", "off", "--prompt", "x", "--history", h.toString(), "--load-state", s.toString(), "--gen", "2");
        assertEquals(2, wrong.exit());
        assertTrue(wrong.err().contains("follows another conversation"), wrong.err());
    }
}
