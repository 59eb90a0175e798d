package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import k3j.testkit.MarkedCheckpoint;
import k3j.trunk.TrunkManifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PackTrunkCommandTest {
    @TempDir
    Path dir;

    @Test
    void packsThenFindsItUpToDate() {
        Path model = dir.resolve("m");
        MarkedCheckpoint.write(model, 4, 1, 1, MarkedCheckpoint.Defect.NONE);
        CliRun r = k3("pack-trunk", model.toString(), dir.resolve("t").toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().contains("packing 4 layers (language_model.model.layers.<L>.*"), r.out());
        assertTrue(r.out().contains("re-read and CRC-32C verified"), r.out());
        assertTrue(Files.isRegularFile(dir.resolve("t").resolve(TrunkManifest.JSON)));
        CliRun again = k3("pack-trunk", model.toString(), dir.resolve("t").toString());
        assertEquals(ExitCode.OK, again.exit(), again.err());
        assertTrue(again.out().contains("already holds a trunk packed from these weights"), again.out());
    }

    @Test
    void aGapIsExitOneWithTheReason() {
        Path model = dir.resolve("m");
        MarkedCheckpoint.write(model, 4, 1, 1, MarkedCheckpoint.Defect.GAP_IN_LAYER_1);
        CliRun r = k3("pack-trunk", model.toString(), dir.resolve("t").toString());
        assertEquals(ExitCode.RUNTIME, r.exit());
        assertTrue(r.err().startsWith("k3 pack-trunk: ") && r.err().contains("layer 1: is not contiguous"), r.err());
        assertFalse(Files.exists(dir.resolve("t").resolve(TrunkManifest.JSON)));
    }

    @Test
    void configWithOtherLayerCountIsRefused() throws IOException {
        Path model = dir.resolve("m");
        MarkedCheckpoint.write(model, 4, 1, 1, MarkedCheckpoint.Defect.NONE);
        Files.copy(Path.of("..", "oracle-fixtures", "config", "released.json"), model.resolve("config.json"));
        CliRun r = k3("pack-trunk", model.toString(), dir.resolve("t").toString());
        assertEquals(ExitCode.RUNTIME, r.exit());
        assertTrue(r.err().contains("the shards hold trunk tensors for 4 layers, config.json says 93"), r.err());
    }

    @Test
    void notADirectoryIsUsage() {
        CliRun r = k3("pack-trunk", dir.resolve("absent").toString(), dir.resolve("t").toString());
        assertEquals(ExitCode.USAGE, r.exit());
    }

    @Test
    void doctorListsPresets() {
        CliRun r = k3("doctor", "--list-presets");
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.out().startsWith("presets (trunk / expert-cache, in GB):\n  ultra "), r.out());
    }
}
