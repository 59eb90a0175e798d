package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import k3j.Repo;
import k3j.model.ModelSizes;
import k3j.plan.Human;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code k3 sim-cache} and {@code k3 doctor} take their sizes from the model given, and say so when they assume the released one. */
class SizesFromTheModelTest {
    @TempDir
    static Path tmp;

    static Path mini, trace;
    static ModelSizes sizes;

    @BeforeAll
    static void aTraceOnMini() throws IOException {
        mini = Repo.path("oracle-fixtures/mini-k3-93");
        sizes = ModelSizes.of(mini);
        // two tokens' worth of requests: layers 1..92, the first top-k experts, then the same again
        ByteBuffer b = ByteBuffer.allocate((int) (2 * sizes.requestsPerToken() * 8)).order(ByteOrder.LITTLE_ENDIAN);
        for (int t = 0; t < 2; t++) for (int l = 1; l <= sizes.moeLayers(); l++) for (int e = 0; e < sizes.topK(); e++) b.putInt(l).putInt(e + t);
        trace = tmp.resolve("expert_trace.bin");
        Files.write(trace, b.array());
    }

    @Test
    void miniHasItsOwnSizes() {
        assertEquals(92, sizes.moeLayers());
        assertTrue(sizes.expertBytes() > 0 && sizes.expertBytes() < 1_000_000, "a mini expert is KB, not 17.5 MB: " + sizes);
        assertEquals(sizes.poolExperts() * sizes.expertBytes(), sizes.routedExpertBytes(), "every expert the size of the first");
        assertTrue(sizes.weightBytes() > sizes.routedExpertBytes() && sizes.weightBytes() < 20_000_000, sizes.toString());
    }

    @Test
    void simCacheTakesTheModelsSizes() {
        CliRun r = k3("sim-cache", trace.toString(), "--model", mini.toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertFalse(r.out().contains("ASSUMED"), r.out());
        assertTrue(r.out().contains(Human.bytes(sizes.expertBytes()) + " per expert, top-" + sizes.topK() + ", "
                + sizes.requestsPerToken() + " requests per token, a pool of " + sizes.poolExperts() + " experts"), r.out());
        assertTrue(r.out().contains("distinct experts touched: " + (sizes.moeLayers() * (sizes.topK() + 1)) + " of " + sizes.poolExperts()), r.out());
        assertTrue(r.out().contains("about 2 token(s)"), r.out());
        assertTrue(r.out().lines().anyMatch(l -> l.startsWith(sizes.poolExperts() + " slots")), "the ladder ends at the whole pool: " + r.out());
        assertFalse(r.out().contains("82432"), "no trace of the released model's pool: " + r.out());
        // a mini expert's reads per token are KB and their time ms or µs: no column of zeros
        java.util.List<String> rows = r.out().lines().filter(l -> l.matches("\\d+ slots .*")).toList();
        assertFalse(rows.isEmpty(), r.out());
        for (String row : rows) {
            assertTrue(row.matches(".* [0-9.]+ (B|KB|MB) +[0-9.]+ (s|ms|µs)$"), "READ/TOK and TIME/TOK in human units: " + row);
            assertFalse(row.contains(" 0.00 "), row);
        }
    }

    @Test
    void simCacheWithoutAModelSaysItAssumesTheReleasedSizes() {
        CliRun r = k3("sim-cache", trace.toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().startsWith("sizes: the released Kimi K3 (ASSUMED: no --model given"), r.out());
        assertEquals(ExitCode.USAGE, k3("sim-cache", trace.toString(), "--model", tmp.resolve("nope").toString()).exit());
    }

    @Test
    void doctorRefusesAMissingFolderAndSizesAGivenModel() {
        CliRun missing = k3("doctor", "/nonexistent/model", "--read-mb", "1");
        assertEquals(ExitCode.USAGE, missing.exit(), missing.out());
        assertTrue(missing.err().contains("no such folder: /nonexistent/model"), missing.err());
        CliRun r = k3("doctor", mini.toString(), "--read-mb", "1");
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().contains("weights " + Human.bytes(sizes.weightBytes())), r.out());
        assertTrue(r.out().contains("none needed: the whole model (" + Human.bytes(sizes.weightBytes()) + ") fits in RAM"), r.out());
        CliRun none = k3("doctor", "--read-mb", "1");
        assertEquals(ExitCode.OK, none.exit(), none.err());
        assertTrue(none.out().contains("no MODEL given, so its sizes are assumed"), none.out());
    }

    @Test
    void doctorSaysWhenTheCoresHaveNoHardwareFma() {
        assertEquals("hardware", DoctorCommand.fmaSupport("amd64", " sse2 avx2 fma avx512f "));
        String absent = DoctorCommand.fmaSupport("amd64", " sse2 avx avx2 ");
        assertTrue(absent.startsWith("ABSENT") && absent.contains("emulated"), absent);
        assertTrue(DoctorCommand.fmaSupport("aarch64", "").startsWith("hardware"));
        assertTrue(DoctorCommand.fmaSupport("amd64", "").startsWith("unknown"));
        CliRun r = k3("doctor", "--read-mb", "1");
        assertTrue(r.out().contains("  FMA          : "), r.out());
    }
}
