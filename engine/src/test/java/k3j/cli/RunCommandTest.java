package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import k3j.cache.ShortReadException;
import k3j.io.CheckpointIndex;
import k3j.model.Assembly;
import k3j.trunk.LayerBytes;
import k3j.trunk.Progress;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkSource;
import k3j.trunk.TrunkStats;
import k3j.trunk.TrunkPacker;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

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
        return run(Assembly.Intercepts.NONE, args);
    }

    Run run(Assembly.Intercepts intercepts, String... args) {
        List<String> a = new ArrayList<>(List.of("run"));
        a.addAll(List.of(args));
        CliRun r = CliRun.k3(intercepts, a.toArray(String[]::new));
        return new Run(r.exit(), r.out(), r.err());
    }

    @Test
    void incrementalRunPrintsTheReferenceIdsAndWritesTheOutJsonAndTheFirstLogits() throws Exception {
        Path json = dir.resolve("run.json"), logits = dir.resolve("logits.bin");
        Run r = run(tiny().toString(), "--ids", PROMPT, "--gen", "20", "--incremental", "--out", json.toString(), "--dump-logits", logits.toString(), "--threads", "2");
        assertEquals(0, r.code(), r.err());
        assertTrue(r.err().contains("generated ids: " + GREEDY), r.err());
        assertEquals(GREEDY + System.lineSeparator(), r.out(), "stdout holds the generated ids alone (no tokenizer), the report is on stderr");
        JsonNode j = new ObjectMapper().readTree(json.toFile());
        List<String> keys = new ArrayList<>();
        j.fieldNames().forEachRemaining(keys::add);
        assertEquals(List.of("prompt_ids", "generated_ids", "full_ids", "layers", "layers_requested", "layers_completed", "expert_drops",
                "peak_rss_bytes", "wall_seconds", "seconds_per_token", "expert_bytes_read", "trunk_bytes_read", "embedding_bytes_read",
                "lm_head_bytes_read", "ultra_low_memory", "generated_text", "sampling", "max_tokens", "incremental", "speculative", "stop_at_eos",
                "eos_id", "stopped", "steps"), keys);
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
    void teacherForcingCheckAgreesOnTheGeneratedSpan() throws Exception {
        Path json = dir.resolve("tf.json");
        Run r = run(tiny().toString(), "--ids", PROMPT + "," + GREEDY, "--tf-check", "--out", json.toString());
        assertEquals(0, r.code(), r.err());
        JsonNode j = new ObjectMapper().readTree(json.toFile());
        assertEquals(31, j.get("tf_positions").asInt());
        assertTrue(j.get("tf_matches").asInt() >= 20, "the 20 generated positions at least: " + j);
        assertEquals(2, run(tiny().toString(), "--ids", "5", "--tf-check").code(), "one id is not enough");
    }

    @Test
    void badRequestsExitTwo() {
        String m = tiny().toString(), out = dir.resolve("x.json").toString();
        assertEquals(2, run(m).code(), "no prompt source");
        assertEquals(2, run(m, "--ids", "1", "--prompt", "hi").code(), "two prompt sources");
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
            assertTrue(r.err().contains("REFUSING: the KV cache"), r.err());
            Run full = run(tiny().toString(), "--ids", "1,2", "--gen", "1", "--recompute", "--out", dir.resolve("y.json").toString());
            assertFalse(full.err().contains("REFUSING: the KV cache"), "full recompute has no KV cache: " + full.err());
            assertEquals(1, full.code(), "but the whole plan is over 95% of 30 KB: exit 1\n" + full.out() + full.err());
            assertTrue(full.err().contains("REFUSING TO START"), full.err());
            assertTrue(full.err().contains("memory plan") && full.err().contains("available        30.00 KB"), full.err());
            assertFalse(Files.exists(dir.resolve("y.json")), "refused before running");
        } finally {
            System.clearProperty(RunCommand.MEM_AVAILABLE_PROPERTY);
        }
    }

    // --------------------------------------------------------------------------------- streaming

    /** tiny-k3 packed into a trunk (its layer 0 has a gap, so the gathering layout, as `k3 pack-trunk --gather`). */
    Path packedTiny() {
        CheckpointIndex index = CheckpointIndex.open(tiny());
        Path t = dir.resolve("trunk");
        TrunkPacker.pack(index, TrunkPacker.layout(index, true), t, Progress.silent(), s -> {}, null);
        return t;
    }

    @Test
    void aStreamedRunIsBitIdenticalToTheResidentRunAndPrintsTheWholeReport() throws Exception {
        Path t = packedTiny(), trace = dir.resolve("trace");
        String m = tiny().toString();
        for (String mode : List.of("--incremental", "--full")) {
            List<String> flags = mode.equals("--incremental") ? List.of() : List.of("--recompute");
            Path resLogits = dir.resolve("res" + mode + ".bin"), strLogits = dir.resolve("str" + mode + ".bin"), json = dir.resolve("str" + mode + ".json");
            List<String> a = new ArrayList<>(List.of(m, "--ids", PROMPT, "--gen", "20", "--out", dir.resolve("res.json").toString(), "--dump-logits", resLogits.toString()));
            a.addAll(flags);
            Run res = run(a.toArray(String[]::new));
            assertEquals(0, res.code(), res.err());
            // one ring slot, the smallest cache (top-k + 1 slots): everything is read every token
            List<String> b = new ArrayList<>(List.of(m, "--ids", PROMPT, "--gen", "20", "--trunk", t.toString(), "--trunk-gb", "0.00001", "--trunk-ring", "1",
                    "--cache-gb", "0.0001", "--threads", "2", "--out", json.toString(), "--dump-logits", strLogits.toString(), "--dump-cache-trace", trace.toString()));
            b.addAll(flags);
            Run str = run(b.toArray(String[]::new));
            assertEquals(0, str.code(), str.out() + str.err());
            assertTrue(str.err().contains("generated ids: " + GREEDY), str.err());
            assertArrayEquals(Files.readAllBytes(resLogits), Files.readAllBytes(strLogits), mode + ": the first step's logits, bit for bit");
            String o = str.err();
            int at = 0;
            for (String part : List.of("memory plan", "trunk (STREAMED)", "TOTAL", "trunk stream:", "ring 1 x", "STEP   TOKEN      FED", "20 tokens in",
                    "generated ids:", "PEAK RSS for the whole run:", "layers completed: 13/13; routed expert drops: 0", "cache [final step]",
                    "wrote " + json, "wrote " + trace.resolve("expert_trace.bin"), "I/O share of wall clock:", "experts, whole run:", "trunk [final]",
                    "pinned 0/13 layers, ring 1 slots")) {
                int i = o.indexOf(part, at);
                assertTrue(i >= 0, "'" + part + "' after position " + at + " of:\n" + o);
                at = i;
            }
            JsonNode j = new ObjectMapper().readTree(json.toFile());
            assertEquals(GREEDY, j.get("generated_ids").toString().replaceAll("[\\[\\]]", ""));
            assertTrue(j.get("trunk_bytes_read").asLong() >= 20L * Files.size(t.resolve("trunk.bin")) / 2, "every token streams the trunk: " + j);
            assertTrue(j.get("expert_bytes_read").asLong() > 0, j.toString());
            assertTrue(Files.size(trace.resolve("expert_trace.bin")) > 0 && Files.exists(trace.resolve("expert_hist.json")));
        }
    }

    @Test
    void presetsAreListedWithoutAModelAndLaterFlagsOverrideThem() throws Exception {
        java.io.PrintStream saved = System.out;
        java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
        System.setOut(new java.io.PrintStream(buf, true));
        int code;
        try {
            code = K3.execute("--list-presets");
        } finally {
            System.setOut(saved);
        }
        assertEquals(0, code);
        assertEquals(k3j.plan.Preset.table(), buf.toString());
        assertTrue(buf.toString().contains("  laptop         3.00 / 1.00    at most 9.4 GB planned for the released model."), buf.toString());
        Run listed = run("--list-presets");
        assertEquals(0, listed.code());
        assertEquals(k3j.plan.Preset.table(), listed.out());
        Path t = packedTiny();
        String m = tiny().toString();
        Run laptop = run(m, "--ids", "1,2", "--gen", "1", "--trunk", t.toString(), "--cache-gb", "5", "--preset", "laptop", "--out", dir.resolve("a.json").toString());
        assertEquals(0, laptop.code(), laptop.err());
        assertTrue(laptop.err().contains("preset   : laptop (trunk 3.00 GB / expert cache 1.00 GB)"), "the preset after --cache-gb wins:\n" + laptop.err());
        Run over = run(m, "--ids", "1,2", "--gen", "1", "--trunk", t.toString(), "--preset", "laptop", "--cache-gb", "0.5", "--trunk-gb", "0.01",
                "--out", dir.resolve("b.json").toString());
        assertEquals(0, over.code(), over.err());
        assertTrue(over.err().contains("preset   : laptop (trunk 0.01 GB / expert cache 0.50 GB)"), "flags after the preset win:\n" + over.err());
        Run unknown = run(m, "--ids", "1", "--trunk", t.toString(), "--preset", "bogus");
        assertEquals(2, unknown.code());
        assertTrue(unknown.err().contains("unknown preset 'bogus'") && unknown.err().contains("workstation"), unknown.err());
        assertEquals(2, run(m, "--ids", "1", "--preset", "laptop").code(), "a preset streams the trunk: needs --trunk");
        Path uj = dir.resolve("u.json");
        Run ultra = run(m, "--ids", PROMPT, "--gen", "20", "--trunk", t.toString(), "--preset", "ultra", "--recompute", "--out", uj.toString());
        assertEquals(0, ultra.code(), ultra.err());
        assertTrue(ultra.err().contains("preset   : ultra (trunk 2.50 GB / expert cache 0.31 GB)"), ultra.err());
        assertTrue(ultra.err().contains("(STREAMED)\n") && ultra.err().contains("model tables: embed + lm_head STREAMED from the checkpoint"), ultra.err());
        assertTrue(ultra.err().contains("generated ids: " + GREEDY), "ultra gives the reference's greedy ids:\n" + ultra.err());
        JsonNode u = new ObjectMapper().readTree(uj.toFile());
        assertTrue(u.get("ultra_low_memory").asBoolean());
        assertEquals(20L * 256 * 128 * 2, u.get("lm_head_bytes_read").asLong(), "the whole LM head read once per step (full recompute, 20 steps)");
        assertTrue(u.get("embedding_bytes_read").asLong() > 0);
    }

    @Test
    void badStreamingFlagsExitTwoAndTrunkOrCacheFailuresExitOne() throws Exception {
        Path t = packedTiny();
        String m = tiny().toString(), out = dir.resolve("x.json").toString();
        assertEquals(2, run(m, "--ids", "1", "--trunk", t.toString(), "--trunk-ring", "9").code(), "ring 0..8");
        assertEquals(2, run(m, "--ids", "1", "--trunk", t.toString(), "--trunk-gb", "lots").code(), "not a number");
        assertEquals(2, run(m, "--ids", "1", "--trunk", t.toString(), "--trunk-gb", "0").code(), "not positive");
        assertEquals(2, run(m, "--ids", "1", "--trunk-gb", "3").code(), "--trunk-gb without --trunk");
        assertEquals(2, run(m, "--ids", "1", "--cache-gb", "-1").code(), "negative cache");
        assertEquals(2, run(m, "--ids", "1", "--threads", "0").code(), "threads");
        assertEquals(2, run(m, "--ids", "1", "--prompt-file", "p.txt").code(), "two prompt sources");
        assertEquals(2, run(m, "--ids", "-1").code(), "negative id");
        assertEquals(2, run(m, "--ids", "1", "--layers", "14").code(), "more layers than the config");
        Run small = run(m, "--ids", "1", "--trunk", t.toString(), "--trunk-gb", "0.001", "--cache-gb", "0.000001", "--out", out);
        assertEquals(1, small.code(), "a cache under top-k + 1 slots cannot start: " + small.err());
        assertTrue(small.err().contains("expert cache"), small.err());
        Run missing = run(m, "--ids", "1", "--trunk", dir.resolve("nowhere").toString(), "--trunk-gb", "0.001", "--cache-gb", "0.001", "--out", out);
        assertEquals(2, missing.code(), "a missing trunk folder is a usage error naming it: " + missing.err());
        assertTrue(missing.err().contains("no such folder"), missing.err());
        // a short trunk.bin: the run refuses it (exit 1) instead of computing on a partial layer
        Path cut = dir.resolve("cut");
        Files.createDirectories(cut);
        Files.copy(t.resolve("trunk.json"), cut.resolve("trunk.json"));
        byte[] bin = Files.readAllBytes(t.resolve("trunk.bin"));
        Files.write(cut.resolve("trunk.bin"), java.util.Arrays.copyOf(bin, bin.length - 4096));
        Run shortTrunk = run(m, "--ids", "1", "--trunk", cut.toString(), "--trunk-gb", "0.001", "--cache-gb", "0.001", "--out", out);
        assertEquals(1, shortTrunk.code(), shortTrunk.err());
        assertTrue(shortTrunk.err().contains("trunk.bin"), shortTrunk.err());
        Run streamedLayers = run(m, "--ids", PROMPT, "--gen", "2", "--trunk", t.toString(), "--trunk-gb", "0.001", "--cache-gb", "0.001", "--layers", "3", "--out", out);
        assertEquals(0, streamedLayers.code(), streamedLayers.err());
        assertTrue(streamedLayers.err().contains("layers completed: 3/3") && streamedLayers.err().contains("NOTE: binding only 3 of 13"), streamedLayers.err());
    }

    @Test
    void aShortExpertReadThroughTheCacheMakesTheRunInvalid() throws Exception {
        Assembly.Intercepts shortReads = Assembly.Intercepts.NONE.withExpertReader(real -> (location, slot) -> {
            real.read(location, slot);
            throw new ShortReadException("read " + (location.length() - 1) + " of " + location.length() + " bytes of " + location.file().getFileName());
        });
        {
            Path json = dir.resolve("bad.json");
            Run r = run(shortReads, tiny().toString(), "--ids", PROMPT, "--gen", "2", "--cache-gb", "0.001", "--out", json.toString());
            assertEquals(4, r.code(), r.out() + r.err());
            assertTrue(r.err().contains("RUN INVALID") && r.err().contains("CORRUPT"), r.err());
            assertTrue(new ObjectMapper().readTree(json.toFile()).get("expert_drops").asLong() > 0, "the drops are in --out");
            Run streamed = run(shortReads, tiny().toString(), "--ids", PROMPT, "--gen", "2", "--trunk", packedTiny().toString(), "--trunk-gb", "0.001", "--cache-gb", "0.001", "--out", json.toString());
            assertEquals(4, streamed.code(), streamed.err() + streamed.err());
        }
    }

    @Test
    void aFailedTrunkReadMidRunFailsTheForwardAndExitsOne() throws Exception {
        Path t = packedTiny(), json = dir.resolve("fail.json");
        int[] acquires = {0};
        Assembly.Intercepts failingTrunk = Assembly.Intercepts.NONE.withTrunkSource(real -> new TrunkSource() {
            @Override
            public int layerCount() {
                return real.layerCount();
            }

            @Override
            public LayerBytes acquire(int layer) {
                if (++acquires[0] > 13 + 5) throw new TrunkException(Path.of("trunk.bin"), layer, "short read on layer " + layer + ": 0 of 4096 bytes");
                return real.acquire(layer);
            }

            @Override
            public void release(LayerBytes bytes) {
                real.release(bytes);
            }

            @Override
            public TrunkStats stats() {
                return real.stats();
            }

            @Override
            public void close() {}
        });
        {
            Run r = run(failingTrunk, tiny().toString(), "--ids", PROMPT, "--gen", "3", "--incremental", "--trunk", t.toString(), "--trunk-gb", "0.0001",
                    "--trunk-ring", "1", "--cache-gb", "0.001", "--out", json.toString());
            assertEquals(1, r.code(), r.out() + r.err());
            assertTrue(r.err().contains("forward pass failed: trunk bind failed at layer 5") && r.err().contains("short read on layer 5"), r.err());
            assertTrue(r.err().contains("layers completed: 5/13"), "the second step stopped at layer 5:\n" + r.err());
            JsonNode j = new ObjectMapper().readTree(json.toFile());
            assertEquals(0, j.get("generated_ids").size(), "no ids from a failed run: " + j);
        }
    }
}
