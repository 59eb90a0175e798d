package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.StreamSupport;
import k3j.Repo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code k3 run} as a text tool, run as a shell runs it (its own JVM and working folder): the generated text alone
 * on stdout, the report on stderr or under --report, no file unless asked, the end-of-sequence stop, every
 * sampling setting echoed in the header and the JSON.
 */
class TextToolTest {
    private static final String TINY = Repo.path("oracle-fixtures/tiny-k3").toString();
    /** A sampled run of the tiny model that draws [EOS] (id 251) at step {@link #EOS_STEP} (found by trying seeds; the model is random). */
    private static final String[] SAMPLED_TO_EOS = {"--ids", "250,17,101", "--temperature", "1.5", "--top-k", "40", "--seed", "13", "--gen", "64"};
    private static final int EOS = 251, EOS_STEP = 8;

    private static JsonNode json(Path p) throws Exception {
        return new ObjectMapper().readTree(p.toFile());
    }

    private static List<Integer> ids(JsonNode a) {
        return StreamSupport.stream(a.spliterator(), false).map(JsonNode::asInt).toList();
    }

    private static String reportLine(String report, String prefix) {
        return report.lines().filter(l -> l.startsWith(prefix)).findFirst().map(l -> l.substring(prefix.length())).orElseThrow(() -> new AssertionError(prefix + " in:\n" + report));
    }

    @Test
    void stdoutHoldsTheTextAloneAndNoFileIsWritten(@TempDir Path dir) throws Exception {
        ChildK3 r = ChildK3.run(dir, "", TINY, "--tok", TINY, "--prompt", "hello", "--gen", "8");
        assertEquals(0, r.exit(), r.err());
        assertEquals(reportLine(r.err(), "generated text: ") + "\n", r.out(), "stdout is the generated text and a newline, nothing else");
        assertTrue(r.err().contains("memory plan") && r.err().contains("STEP") && r.err().contains("PEAK RSS"), "the report is on stderr:\n" + r.err());
        try (var files = Files.list(dir)) {
            assertEquals(List.of(), files.toList(), "no file is written without --out (k3_run.json was)");
        }
        ChildK3 ids = ChildK3.run(dir, "", TINY, "--ids", "250,17,101", "--gen", "3");
        assertEquals(0, ids.exit(), ids.err());
        assertEquals(reportLine(ids.err(), "generated ids: ") + "\n", ids.out(), "without a tokenizer stdout is the ids");
        assertTrue(ids.out().matches("\\d+,\\d+,\\d+\n"), ids.out());
    }

    @Test
    void reportGoesUnderReportFile(@TempDir Path dir) throws Exception {
        Path report = dir.resolve("run.txt"), out = dir.resolve("run.json");
        ChildK3 r = ChildK3.run(dir, "", TINY, "--tok", TINY, "--prompt", "hello", "--gen", "4", "--report", report.toString(), "--out", out.toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals("", r.err(), "with --report nothing of the report is on stderr");
        String text = Files.readString(report);
        assertTrue(text.contains("STEP") && text.contains("memory plan") && text.contains("wrote " + out), text);
        assertEquals(json(out).path("generated_text").asText() + "\n", r.out());
        ChildK3 same = ChildK3.run(dir, "", TINY, "--ids", "1", "--report", out.toString(), "--out", out.toString());
        assertEquals(ExitCode.USAGE, same.exit(), same.err());
    }

    @Test
    void samplingSettingsAreEchoedInTheHeaderAndTheJson(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("r.json");
        CliRun r = CliRun.k3(TINY, "--tok", TINY, "--prompt", "hello", "--gen", "3", "--incremental", "--temperature", "0.7", "--top-p", "0.9",
                "--top-k", "5", "--seed", "3", "--out", out.toString());
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.err().contains("  sampling : temperature 0.7, top-p 0.9, top-k 5, seed 3; stops at [EOS] (id 251)\n"), r.err());
        JsonNode j = json(out);
        assertEquals(0.7, j.path("sampling").path("temperature").asDouble());
        assertEquals(0.9, j.path("sampling").path("top_p").asDouble());
        assertEquals(5, j.path("sampling").path("top_k").asInt());
        assertEquals(3, j.path("sampling").path("seed").asLong());
        assertEquals(3, j.path("max_tokens").asInt());
        assertTrue(j.path("stop_at_eos").asBoolean() && j.path("incremental").asBoolean(), j.toString());
        assertEquals(EOS, j.path("eos_id").asInt());
        CliRun greedy = CliRun.k3(TINY, "--ids", "1,2", "--gen", "2", "--ignore-eos", "--out", out.toString());
        assertEquals(0, greedy.exit(), greedy.err());
        assertTrue(greedy.err().contains("  sampling : greedy (temperature 0); --ignore-eos: all 2 tokens\n"), greedy.err());
        assertFalse(json(out).path("stop_at_eos").asBoolean());
    }

    @Test
    void generationStopsAtTheEndOfSequenceUnlessIgnoreEos(@TempDir Path dir) throws Exception {
        Path stop = dir.resolve("stop.json"), past = dir.resolve("past.json");
        CliRun a = CliRun.k3(with(SAMPLED_TO_EOS, "--tok", TINY, "--incremental", "--out", stop.toString()));
        assertEquals(0, a.exit(), a.err());
        List<Integer> stopped = ids(json(stop).path("generated_ids"));
        assertEquals(EOS_STEP + 1, stopped.size(), "the run ends with the step that drew [EOS]: " + stopped);
        assertEquals(EOS, stopped.get(EOS_STEP));
        assertEquals("eos", json(stop).path("stopped").asText());
        assertTrue(a.err().contains("stopped at [EOS] after " + (EOS_STEP + 1) + " of 64 tokens"), a.err());
        assertFalse(a.out().contains("[EOS]"), "the text ends before the end of sequence: " + a.out());
        CliRun b = CliRun.k3(with(SAMPLED_TO_EOS, "--tok", TINY, "--incremental", "--ignore-eos", "--out", past.toString()));
        assertEquals(0, b.exit(), b.err());
        List<Integer> all = ids(json(past).path("generated_ids"));
        assertEquals(64, all.size(), "--ignore-eos runs to --gen");
        assertEquals(stopped, all.subList(0, stopped.size()), "the same ids up to the end of sequence");
        assertEquals("max_tokens", json(past).path("stopped").asText());
        CliRun full = CliRun.k3(with(SAMPLED_TO_EOS, "--tok", TINY, "--recompute", "--out", stop.toString()));
        assertEquals(0, full.exit(), full.err());
        assertEquals(stopped, ids(json(stop).path("generated_ids")), "full recompute stops at the same step");
    }

    @Test
    void speculativeDecodingStopsAtTheSameEndOfSequence(@TempDir Path dir) throws Exception {
        // greedy from these ids draws [EOS] at step 124 (a long repetitive run: drafts are accepted, and one must not run past it)
        Path plain = dir.resolve("plain.json"), spec = dir.resolve("spec.json");
        CliRun a = CliRun.k3(TINY, "--tok", TINY, "--ids", "250,17,101", "--gen", "200", "--incremental", "--out", plain.toString());
        CliRun b = CliRun.k3(TINY, "--tok", TINY, "--ids", "250,17,101", "--gen", "200", "--incremental", "--spec", "8", "--out", spec.toString(),
                "--save-state", dir.resolve("s").toString());
        assertEquals(0, a.exit(), a.err());
        assertEquals(0, b.exit(), b.err());
        List<Integer> ids = ids(json(plain).path("generated_ids"));
        assertEquals(125, ids.size(), "greedy stops at [EOS] at step 124: " + ids);
        assertEquals(EOS, ids.get(124));
        assertEquals(ids, ids(json(spec).path("generated_ids")), "speculative decoding stops at the same id");
        assertTrue(b.err().contains("saved the state (127 positions)"), "the state holds the prompt and every id but the [EOS]:\n" + b.err());
    }

    /**
     * A run stopped by a real signal keeps what it generated: stdout, streamed token by token, holds exactly the ids
     * --out records, --out and --report say "interrupted" and the step reached, and the exit code is the signal's
     * (130 SIGINT, 143 SIGTERM). Signalled right after the STEP table starts (the prompt's step), and after 20
     * streamed ids.
     */
    @Test
    void aRunStoppedBySigintOrSigtermKeepsWhatItGenerated(@TempDir Path dir) throws Exception {
        for (var c : List.of(new Object[] {"INT", 0, ExitCode.INTERRUPTED}, new Object[] {"INT", 20, ExitCode.INTERRUPTED}, new Object[] {"TERM", 5, ExitCode.TERMINATED})) {
            String signal = (String) c[0];
            int after = (Integer) c[1];
            Path out = dir.resolve(signal + after + ".json"), report = dir.resolve(signal + after + ".txt");
            List<String> args = new java.util.ArrayList<>(List.of(TINY, "--ids", "250,17,101", "--gen", "4000", "--ignore-eos", "--threads", "1", "--out", out.toString()));
            if (after > 0) args.addAll(List.of("--report", report.toString()));   // else the STEP table on stderr says when to signal
            Signalled r = Signalled.run(dir, signal, after, args.toArray(String[]::new));
            String what = "SIG" + signal + " after " + after + " streamed ids: ";
            assertEquals((int) c[2], r.exit(), what + r.err());
            JsonNode j = json(out);
            List<Integer> kept = ids(j.path("generated_ids"));
            assertTrue(!kept.isEmpty() && kept.size() < 4000 && kept.size() >= after, what + kept.size() + " ids kept");
            assertEquals(String.join(",", kept.stream().map(String::valueOf).toList()) + "\n", r.out(), what + "stdout holds every id generated");
            assertEquals("interrupted", j.path("stopped").asText(), what + j);
            assertEquals(kept.size(), j.path("steps").asInt(), what + j);
            String text = after > 0 ? Files.readString(report) : r.err();
            assertTrue(text.contains("stopped: interrupted (SIG" + signal + ") after step " + (kept.size() - 1) + ": " + kept.size() + " of 4000 tokens"), what + text);
            assertTrue(r.err().contains("k3: SIG" + signal + ": stopping after this token"), what + r.err());
        }
    }

    private static String[] with(String[] base, String... more) {
        String[] a = new String[base.length + more.length + 1];
        a[0] = TINY;
        System.arraycopy(base, 0, a, 1, base.length);
        System.arraycopy(more, 0, a, 1 + base.length, more.length);
        return a;
    }
}
