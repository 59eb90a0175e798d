package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import k3j.Repo;
import k3j.testkit.ReleasedLayout;
import k3j.testkit.SafetensorsWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

class InspectCommandTest {
    @TempDir
    Path dir;

    private static CliRun inspect(String path) {
        return k3("inspect", path);
    }

    private static void safetensors(Path file, String header, int dataBytes) {
        SafetensorsWriter.write(file, header, new byte[dataBytes]);
    }

    @Test
    void aReleasedLayoutIsSummarisedFromItsNames() throws IOException {
        Path model = dir.resolve("model");
        new ReleasedLayout(ReleasedLayout.Geometry.released().withExperts(2).withShards(5)).write(model);
        Files.writeString(model.resolve("config.json"), "{}");
        CliRun r = inspect(model.toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().contains("shards: 5 files"), r.out());
        assertTrue(r.out().contains("config.json: REFUSED:"), r.out());
        assertTrue(r.out().contains("attention: " + "KKKM".repeat(23) + "M (69 KDA, 24 MLA)"), r.out());
        assertTrue(r.out().contains("mlp:       D" + "E".repeat(92) + " (1 dense, 92 MoE)"), r.out());
        assertTrue(r.out().contains("routed experts: 184"), r.out());
        assertTrue(r.out().matches("(?s).*routed expert +1104 tensors.*"), r.out());
        assertTrue(r.out().matches("(?s).*embedding +2 tensors.*"), r.out());
    }

    @Test
    void aConfigFileIsSummarisedOrRefused() throws IOException {
        CliRun ok = inspect(Repo.path("oracle-fixtures/config/released.json").toString());
        assertEquals(ExitCode.OK, ok.exit(), ok.err());
        assertTrue(ok.out().contains("hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA"), ok.out());
        Path bad = dir.resolve("config.json");
        Files.writeString(bad, "{}");
        CliRun refused = inspect(bad.toString());
        assertEquals(ExitCode.USAGE, refused.exit(), refused.out());
        assertTrue(refused.err().contains("hidden_size"), refused.err());
    }

    @Test
    void trailingBytesAreANoteNotAnError() throws IOException {
        Path f = dir.resolve("t.safetensors");
        safetensors(f, "{\"w\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 7);
        CliRun r = inspect(f.toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().contains("5 trailing bytes"), r.out());
        assertTrue(r.out().matches("(?s).*U8 +1 tensors +2 bytes.*"), r.out());
    }

    @Test
    void anInvalidCheckpointIsOneLineAndExitOne() throws IOException {
        Path f = dir.resolve("bad.safetensors");
        safetensors(f, "{\"w\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2);
        CliRun r = inspect(f.toString());
        assertEquals(ExitCode.RUNTIME, r.exit());
        assertEquals("k3 inspect: " + f + ": tensor \"w\": data_offsets span 2 bytes but shape [3] of U8 implies 3 [size-mismatch]",
                r.err().strip());
        assertFalse(r.err().contains("Exception"));
    }

    @Test
    void badArgumentsAreUsageErrors() throws IOException {
        assertEquals(ExitCode.USAGE, inspect(dir.resolve("missing").toString()).exit());
        Path txt = Files.writeString(dir.resolve("notes.txt"), "x");
        CliRun r = inspect(txt.toString());
        assertEquals(ExitCode.USAGE, r.exit());
        assertTrue(r.err().contains("not a model directory"), r.err());
        StringWriter err = new StringWriter();
        CommandLine cl = K3.commandLine();
        cl.setErr(new PrintWriter(err, true));
        assertEquals(ExitCode.USAGE, cl.execute("inspect"));
    }
}
