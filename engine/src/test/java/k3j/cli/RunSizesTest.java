package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import k3j.Repo;
import k3j.io.CheckpointIndex;
import k3j.trunk.Progress;
import k3j.trunk.TrunkPacker;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The run's refusals and memory plan come from the model's own sizes: a 5 MB model streamed from its trunk, or
 * writing a cache trace, with the default budgets (16 GB trunk, 64 GB cache) on a machine with 2 GB available is
 * planned at its real size and runs; the plan shows the JVM; the KV line follows the banner.
 */
class RunSizesTest {
    static final String PROMPT = "250,17,101,3,199,64,128,42,7,230,88,155";
    static final Pattern LINE = Pattern.compile("  (trunk \\(STREAMED\\)|expert cache|TOTAL|JVM itself|embed \\+ lm_head|recurrent state|buffers|KV cache) +([0-9.]+) (B|KB|MB|GB|TB)");

    @TempDir
    static Path dir;

    static Path tiny, trunk;

    @BeforeAll
    static void packTiny() {
        tiny = Repo.path("oracle-fixtures/tiny-k3");
        CheckpointIndex index = CheckpointIndex.open(tiny);
        trunk = dir.resolve("trunk");
        TrunkPacker.pack(index, TrunkPacker.layout(index, true), trunk, Progress.silent(), s -> {}, null);
        // The plan counts the JVM it runs in; in-process, that is this test JVM (its RSS depends on the tests
        // before it), so the small machine is 2 GB beyond what this JVM already holds.
        long jvm = k3j.plan.MemInfo.rss().orElse(0);
        System.setProperty(RunCommand.MEM_AVAILABLE_PROPERTY, Long.toString(2_000_000_000L + 2 * jvm));
    }

    @AfterAll
    static void forgetTheSmallMachine() {
        System.clearProperty(RunCommand.MEM_AVAILABLE_PROPERTY);
    }

    static CliRun run(String... args) {
        String[] a = new String[args.length + 1];
        a[0] = "run";
        System.arraycopy(args, 0, a, 1, args.length);
        return k3(a);
    }

    static double bytes(String out, String label) {
        Matcher m = LINE.matcher(out);
        while (m.find()) {
            if (!m.group(1).trim().equals(label)) continue;
            double v = Double.parseDouble(m.group(2));
            return v * switch (m.group(3)) { case "KB" -> 1e3; case "MB" -> 1e6; case "GB" -> 1e9; case "TB" -> 1e12; default -> 1; };
        }
        throw new AssertionError("no '" + label + "' line in\n" + out);
    }

    /** The plan's own lines (every line of the memory plan but the JVM's and the total), summed. */
    static double planned(String out) {
        double sum = 0;
        for (String label : List.of("trunk (STREAMED)", "embed + lm_head", "expert cache", "recurrent state", "buffers", "KV cache")) sum += bytes(out, label);
        return sum;
    }

    @Test
    void aTrunkWithoutAPresetIsPlannedAtTheModelsOwnSize() {
        CliRun r = run(tiny.toString(), "--ids", PROMPT, "--gen", "2", "--trunk", trunk.toString(), "--out", dir.resolve("a.json").toString());
        assertEquals(ExitCode.OK, r.exit(), r.out() + r.err());
        assertFalse(r.err().contains("REFUSING"), r.err());
        assertTrue(bytes(r.err(), "trunk (STREAMED)") < 50e6, "the real trunk, not the 16 GB budget:\n" + r.err());
        assertTrue(bytes(r.err(), "expert cache") < 50e6, "the experts' own size, not the 64 GB budget:\n" + r.err());
        // the JVM line is the test JVM's own RSS (it grows with the suite around it): the model's part is what is judged
        assertTrue(bytes(r.err(), "TOTAL") - bytes(r.err(), "JVM itself") < 50e6, r.err());
        assertTrue(r.err().contains("JVM itself"), r.err());
        assertFalse(r.err().contains("64.00 GB"), "no line quotes the default cache budget:\n" + r.err());
        assertFalse(r.err().contains("x 0.00 GB"), "ring slots in real units:\n" + r.err());
        assertTrue(r.err().matches("(?s).*ring \\d+ x [0-9.]+ (KB|MB).*"), r.err());
    }

    @Test
    void ultraPlansTheLmHeadChunkItUsesSoItNeverPlansMoreThanLaptop() {
        CliRun ultra = run(tiny.toString(), "--ids", PROMPT, "--gen", "1", "--trunk", trunk.toString(), "--preset", "ultra", "--out", dir.resolve("u.json").toString());
        CliRun laptop = run(tiny.toString(), "--ids", PROMPT, "--gen", "1", "--trunk", trunk.toString(), "--preset", "laptop", "--out", dir.resolve("l.json").toString());
        assertEquals(ExitCode.OK, ultra.exit(), ultra.out() + ultra.err());
        assertEquals(ExitCode.OK, laptop.exit(), laptop.out() + laptop.err());
        // the tiny head is a few KB: the streamed chunk is that, not the released model's 64 MiB
        assertTrue(bytes(ultra.err(), "embed + lm_head") < 1e6, ultra.err());
        // the model's own lines, summed: TOTAL minus the JVM's measured RSS is only as exact as two GB figures rounded
        // to 10 MB each, and the RSS moves between the two runs
        assertTrue(planned(ultra.err()) <= planned(laptop.err()), "ultra's plan is the smallest:\n" + ultra.err() + "\n" + laptop.err());
        assertFalse(ultra.err().contains("0.00 B") || laptop.err().contains("0.00 B"), "whole bytes as '0 B':\n" + ultra.err());
    }

    @Test
    void packTrunkSpeaksInTheTrunksOwnUnits() {
        CliRun r = k3("pack-trunk", tiny.toString(), dir.resolve("units-trunk").toString(), "--gather");
        assertEquals(ExitCode.OK, r.exit(), r.out() + r.err());
        assertFalse(r.out().contains("0.00 GB"), r.out());
        assertTrue(r.out().matches("(?s).*packing \\d+ layers .*: [0-9.]+ (KB|MB), .*wrote .*: [0-9.]+ (KB|MB) across .*"), r.out());
    }

    @Test
    void aMissingTrunkFolderIsNamed() {
        CliRun r = run(tiny.toString(), "--ids", PROMPT, "--gen", "1", "--trunk", "/nonexistent/trunk");
        assertEquals(ExitCode.USAGE, r.exit(), r.err());
        assertTrue(r.err().contains("no such folder: /nonexistent/trunk"), r.err());
        assertFalse(r.err().contains("REFUSING"), r.err());
    }

    @Test
    void aCacheTraceDoesNotAskForTheDefaultCache() {
        CliRun r = run(tiny.toString(), "--ids", PROMPT, "--gen", "2", "--dump-cache-trace", dir.resolve("trace").toString(),
                "--out", dir.resolve("b.json").toString());
        assertEquals(ExitCode.OK, r.exit(), r.out() + r.err());
        assertTrue(bytes(r.err(), "expert cache") < 50e6, r.err());
    }

    @Test
    void theKvLineFollowsTheBanner() {
        CliRun r = run(tiny.toString(), "--ids", PROMPT, "--gen", "2", "--incremental", "--out", dir.resolve("c.json").toString());
        assertEquals(ExitCode.OK, r.exit(), r.out() + r.err());
        int banner = r.err().indexOf("Kimi K3"), kv = r.err().indexOf("  KV cache :");
        assertTrue(banner >= 0 && kv > banner, "the KV line after the banner:\n" + r.err());
    }
}
