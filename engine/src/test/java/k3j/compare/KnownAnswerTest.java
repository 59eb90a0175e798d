package k3j.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.Repo;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KnownAnswerTest {
    @TempDir
    Path dir;

    @Test
    void theReleasedConfigWithItsNinetySixShardsIsSelected() throws Exception {
        ModelConfig released = ConfigReader.read(Repo.path("oracle-fixtures/config/released.json"));
        for (int i = 1; i <= 96; i++) Files.createFile(dir.resolve(String.format("model-%05d-of-00096.safetensors", i)));
        assertEquals(List.of(), KnownAnswer.skipReason(released, dir));
        assertEquals(released.layerMap(), KnownAnswer.releasedLayerMap());
    }

    @Test
    void aMissingShardIsAVisibleSkipReason() throws Exception {
        ModelConfig released = ConfigReader.read(Repo.path("oracle-fixtures/config/released.json"));
        for (int i = 1; i <= 95; i++) Files.createFile(dir.resolve(String.format("model-%05d-of-00096.safetensors", i)));
        List<String> why = KnownAnswer.skipReason(released, dir);
        assertEquals(1, why.size(), why.toString());
        assertTrue(why.getFirst().contains("95 of the released 96 shards"), why.toString());
    }

    @Test
    void anotherModelIsSkippedNamingEveryDifference() {
        ModelConfig mini = ConfigReader.read(Repo.path("oracle-fixtures/mini-k3-93/config.json"));
        List<String> why = KnownAnswer.skipReason(mini, Repo.path("oracle-fixtures/mini-k3-93"));
        assertTrue(why.stream().anyMatch(w -> w.startsWith("hidden_size is 40")), why.toString());
        assertTrue(why.stream().anyMatch(w -> w.startsWith("vocab_size is 160")), why.toString());
        assertTrue(why.stream().anyMatch(w -> w.contains("0 of the released 96 shards")), why.toString());
    }

    @Test
    void theScaleFixtureHasTheWidthsButNotTheLayers() {
        ModelConfig scale = ConfigReader.read(Repo.path("oracle-fixtures/scale-k3/config.json"));
        List<String> why = KnownAnswer.skipReason(scale, dir);
        assertTrue(why.stream().anyMatch(w -> w.startsWith("num_hidden_layers is 4")), why.toString());
        assertTrue(why.stream().noneMatch(w -> w.startsWith("hidden_size")), why.toString());
    }
}
