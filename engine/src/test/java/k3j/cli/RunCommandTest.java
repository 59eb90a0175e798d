package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code k3 <model_dir> ...} on the tiny oracle: the reference's ids, the --out keys, --dump-logits, the exit codes of bad requests. */
class RunCommandTest {
    static final String PROMPT = "250,17,101,3,199,64,128,42,7,230,88,155";
    static final String GREEDY = "238,63,2,176,58,116,55,140,53,183,209,28,85,16,110,39,200,53,179,2";

    @TempDir
    Path dir;

    record Run(int code, String out, String err) {}

    static Path tiny() {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("oracle-fixtures/tiny-k3"))) return p.resolve("oracle-fixtures/tiny-k3");
        }
        throw new AssertionError("oracle-fixtures/tiny-k3 not found");
    }

    Run run(String... args) {
        CommandLine cl = K3.commandLine();
        StringWriter out = new StringWriter(), err = new StringWriter();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        List<String> a = new ArrayList<>(List.of("run"));
        a.addAll(List.of(args));
        int code = cl.execute(a.toArray(String[]::new));
        return new Run(code, out.toString(), err.toString());
    }

    @Test
    void incrementalRunPrintsTheReferenceIdsAndWritesTheOutJsonAndTheFirstLogits() throws Exception {
        Path json = dir.resolve("run.json"), logits = dir.resolve("logits.bin");
        Run r = run(tiny().toString(), "--ids", PROMPT, "--gen", "20", "--incremental", "--out", json.toString(), "--dump-logits", logits.toString(), "--threads", "2");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.out().contains("generated ids: " + GREEDY), r.out());
        JsonNode j = new ObjectMapper().readTree(json.toFile());
        List<String> keys = new ArrayList<>();
        j.fieldNames().forEachRemaining(keys::add);
        assertEquals(List.of("prompt_ids", "generated_ids", "full_ids", "layers", "layers_requested", "layers_completed", "expert_drops",
                "peak_rss_bytes", "wall_seconds", "seconds_per_token", "expert_bytes_read", "trunk_bytes_read", "embedding_bytes_read",
                "lm_head_bytes_read", "ultra_low_memory", "generated_text"), keys);
        assertEquals(GREEDY, j.get("generated_ids").toString().replaceAll("[\\[\\]]", ""));
        assertEquals(13, j.get("layers_completed").asInt());
        assertEquals(0, j.get("expert_drops").asInt());
        byte[] b = Files.readAllBytes(logits);
        assertEquals(256 * 4, b.length, "V float32 logits");
        ByteBuffer bb = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        int best = 0;
        for (int i = 1; i < 256; i++) if (bb.getFloat(4 * i) > bb.getFloat(4 * best)) best = i;
        assertEquals(238, best, "the dumped logits chose the first generated id");
    }

    @Test
    void badRequestsExitTwo() {
        String m = tiny().toString(), out = dir.resolve("x.json").toString();
        assertEquals(2, run(m).code(), "no prompt source");
        assertEquals(2, run(m, "--ids", "1", "--prompt", "hi").code(), "two prompt sources");
        assertEquals(2, run(m, "--prompt", "hi").code(), "needs a tokenizer");
        Run oov = run(m, "--ids", "1,256", "--out", out);
        assertEquals(2, oov.code());
        assertTrue(oov.err().contains("token id 256 is outside the vocabulary of 256"), oov.err());
        assertEquals(2, run(m, "--ids", "1", "--gen", "4097").code(), "gen limit");
        assertEquals(2, run(m, "--ids", "1,x").code(), "not an id");
        assertEquals(2, run(m, "--ids", "1", "--unknown").code(), "unknown option");
        assertEquals(2, run(dir.toString(), "--ids", "1").code(), "no config: ABORTED");
        assertEquals(2, K3.execute("-x"), "first argument is an option");
    }

    @Test
    void aKvCacheBeyondNinetyPercentOfAvailableMemoryIsRefused() {
        System.setProperty(RunCommand.MEM_AVAILABLE_PROPERTY, "30000");
        try {
            Run r = run(tiny().toString(), "--ids", "1,2", "--incremental", "--out", dir.resolve("x.json").toString());
            assertEquals(2, r.code(), r.out() + r.err());
            assertTrue(r.err().contains("REFUSING"), r.err());
            assertEquals(0, run(tiny().toString(), "--ids", "1,2", "--gen", "1", "--out", dir.resolve("y.json").toString()).code(), "full recompute has no KV cache");
        } finally {
            System.clearProperty(RunCommand.MEM_AVAILABLE_PROPERTY);
        }
    }
}
