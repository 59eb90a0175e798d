package k3j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.testkit.ReleasedLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The binder's refusals: a partial shard set is ONE error listing every layer; a wrong shape names tensor, found and expected. */
class BinderTest {
    @TempDir
    Path dir;

    static Path root() {
        return TinyOracleTest.tiny().getParent().getParent();
    }

    static ModelConfig released(int experts, int topK) throws IOException {
        ObjectNode n = (ObjectNode) new ObjectMapper().readTree(root().resolve("oracle-fixtures/config/released.json").toFile());
        ObjectNode tc = (ObjectNode) n.get("text_config");
        tc.put("num_experts", experts);
        tc.put("num_experts_per_token", topK);
        return ConfigReader.read(n, "released.json with " + experts + " experts");
    }

    @Test
    void aPartialShardSetIsOneErrorListingEveryLayerThatCannotBind() throws IOException {
        ReleasedLayout layout = new ReleasedLayout(ReleasedLayout.Geometry.released().withExperts(3).withShards(7));
        ReleasedLayout.Written w = layout.write(dir.resolve("k3"));
        try {
            Files.delete(w.dir().resolve(CheckpointIndex.INDEX_FILE));
            Files.delete(w.shards().get(2));
            Files.delete(w.shards().get(4));
            CheckpointIndex idx = CheckpointIndex.open(w.dir());
            BindException e = assertThrows(BindException.class, () -> Binder.bind(idx, released(3, 2)));
            assertTrue(e.layers().size() > 2, "several layers: " + e.layers());
            assertTrue(e.getMessage().startsWith(e.layers().size() + " of 93 layers are missing tensors"), e.getMessage().lines().findFirst().orElse(""));
            assertTrue(e.getMessage().contains("missing tensor \"language_model.model.layers." + e.layers().get(0) + "."), "names a missing tensor");
        } finally {
            ReleasedLayout.delete(w);
        }
    }

    @Test
    void theReleasedLayoutBindsWhole() throws IOException {
        ReleasedLayout.Written w = new ReleasedLayout(ReleasedLayout.Geometry.released().withExperts(3).withShards(7)).write(dir.resolve("k3"));
        try {
            ModelBinding b = Binder.bind(CheckpointIndex.open(w.dir()), released(3, 2));
            assertEquals(93, b.layers().size());
            assertEquals(92 * 3, b.expertCount());
        } finally {
            ReleasedLayout.delete(w);
        }
    }

    @Test
    void aWrongShapeNamesTheTensorWhatWasFoundAndWhatWasExpected() throws IOException {
        ObjectNode n = (ObjectNode) new ObjectMapper().readTree(TinyOracleTest.tiny().resolve("config.json").toFile());
        ((ObjectNode) n.get("text_config")).put("q_lora_rank", 50);
        ModelConfig c = ConfigReader.read(n, "tiny with q_lora 50");
        BindException e = assertThrows(BindException.class, () -> Binder.bind(CheckpointIndex.open(TinyOracleTest.tiny()), c));
        assertEquals(List.of(3, 7, 11, 12), e.layers(), "every MLA layer, and only those");
        assertTrue(e.getMessage().contains("\"language_model.model.layers.3.self_attn.q_a_proj.weight\" has shape [52, 128], expected [50, 128]"), e.getMessage());
    }

    @Test
    void aDenseMatrixMustBeFloat() {
        TinyOracleTest.tiny();
        String bad = Binder.check(new k3j.io.TensorInfo("x", 0, Path.of("s"), k3j.io.DType.U8, new long[] {4, 4}, 0, 16),
                Binder.Want.matrix("x", 4, 4));
        assertEquals("is U8, expected BF16 (kept narrow) or F32 / F16 (F32 matrix) for a dense matrix", bad);
    }
}
