package k3j.cli;

import static k3j.cli.CliRun.k3;
import static k3j.cli.UsageTest.assertShortUsageError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import k3j.Repo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code k3 serve}'s flags are refused in one line before the model is opened; {@code k3 run --logprobs N} writes each id's entry to --out. */
class ServeAndLogprobsFlagsTest {
    @TempDir
    Path dir;

    @Test
    void serveRefusesBadFlagsInOneLine() {
        String tiny = Repo.path("oracle-fixtures/tiny-k3").toString();
        assertShortUsageError(k3("serve", tiny, "--port", "70000"), "serve", "k3: --port must be 0 to 65535");
        assertShortUsageError(k3("serve", tiny, "--max-active", "0"), "serve", "k3: --max-active");
        assertShortUsageError(k3("serve", tiny, "--max-body-bytes", "0"), "serve", "k3: --max-body-bytes must be");
        assertShortUsageError(k3("serve", tiny, "--api-key", ""), "serve", "k3: --api-key must not be empty");
        assertShortUsageError(k3("serve", dir.resolve("none").toString()), "serve", "k3: no such folder");
    }

    @Test
    void runWritesEachGeneratedIdsLogprobAndAlternatives() throws Exception {
        String tiny = Repo.path("oracle-fixtures/tiny-k3").toString();
        assertShortUsageError(k3("run", tiny, "--ids", "1,2", "--logprobs", "21", "--out", dir.resolve("a.json").toString()), "run", "k3: --logprobs must be 0 to 20");
        assertShortUsageError(k3("run", tiny, "--ids", "1,2", "--logprobs", "2"), "run", "k3: --logprobs writes to --out");
        Path out = dir.resolve("run.json");
        CliRun r = k3("run", tiny, "--ids", "104,101,108", "--gen", "5", "--ignore-eos", "--logprobs", "3", "--out", out.toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        JsonNode j = new ObjectMapper().readTree(out.toFile());
        JsonNode lps = j.get("logprobs"), ids = j.get("generated_ids");
        assertEquals(ids.size(), lps.size());
        for (int i = 0; i < lps.size(); i++) {
            JsonNode e = lps.get(i);
            assertEquals(ids.get(i).asInt(), e.get("id").asInt());
            assertEquals(3, e.get("top_ids").size());
            assertEquals(e.get("id").asInt(), e.get("top_ids").get(0).asInt(), "greedy: the id is the most likely");
            assertEquals(e.get("logprob").floatValue(), e.get("top_logprobs").get(0).floatValue());
            float p = e.get("logprob").floatValue();
            assertTrue(p <= 0 && p >= e.get("top_logprobs").get(2).floatValue() && Float.isFinite(p), e.toString());
        }
    }
}
