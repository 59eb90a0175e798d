package k3j.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The derived constants on the released K3 config (docs/semantics.md §1.4, §1.6), and the file-level refusals. */
class ModelConfigTest {
    /** Surefire runs in engine/; the fixture is the repository's copy of the released config.json. */
    static final Path RELEASED = Path.of("..", "oracle-fixtures", "config", "released.json");

    static ModelConfig released() {
        assertTrue(Files.exists(RELEASED), "fixture missing: " + RELEASED.toAbsolutePath());
        return ConfigReader.read(RELEASED);
    }

    @Test
    void releasedFieldsAreTheOfficialValues() {
        ModelConfig c = released();
        assertEquals(ModelConfig.Shape.NESTED, c.shape());
        assertEquals(7168, c.hiddenSize());
        assertEquals(93, c.layerCount());
        assertEquals(163840, c.vocabSize());
        assertEquals(1e-5f, c.rmsNormEps());
        assertEquals(96, c.kdaHeads());
        assertEquals(128, c.kdaHeadDim());
        assertEquals(4, c.shortConvKernel());
        assertEquals(-5f, c.gateLowerBound());
        assertEquals(96, c.mlaHeads());
        assertEquals(1536, c.qLoraRank());
        assertEquals(512, c.kvLoraRank());
        assertEquals(128, c.qkNopeHeadDim());
        assertEquals(64, c.qkRopeHeadDim());
        assertEquals(128, c.vHeadDim());
        assertTrue(c.mlaOutputGate());
        assertEquals(896, c.expertCount());
        assertEquals(16, c.topK());
        assertEquals(2, c.sharedExpertCount());
        assertEquals(3584, c.latentSize());
        assertEquals(3072, c.moeIntermediate());
        assertEquals(1f, c.routedScalingFactor());
        assertTrue(c.moeRenormalize());
        assertTrue(c.latentNorm());
        assertEquals(1, c.firstDenseLayers());
        assertEquals(1, c.moeLayerFreq());
        assertEquals(33792, c.denseIntermediate());
        assertEquals(12, c.attnResBlockSize());
        assertEquals(4f, c.situBeta());
        assertEquals(25f, c.situLinearBeta());
        assertTrue(c.declaresMxfp4());
        assertEquals(List.of(), c.defaulted());
    }

    @Test
    void releasedLayerMapIs69KdaAnd24Mla() {
        ModelConfig c = released();
        assertEquals(24, c.mlaLayerCount());
        assertEquals(69, c.kdaLayerCount());
        var mla = new ArrayList<Integer>();
        for (int l = 0; l < 93; l++) if (c.layerKind(l) == LayerKind.MLA) mla.add(l);
        var expected = new ArrayList<Integer>();
        for (int l = 3; l <= 91; l += 4) expected.add(l);
        expected.add(92); // 93 = 23*4 + 1: the last two layers are both MLA
        assertEquals(expected, mla);
        assertEquals(LayerKind.KDA, c.layerKind(0));
        assertEquals(LayerKind.MLA, c.layerKind(91));
        assertEquals(LayerKind.MLA, c.layerKind(92));
        assertEquals("KKKM".repeat(23) + "M", c.layerMap());
        assertThrows(IndexOutOfBoundsException.class, () -> c.layerKind(93));
    }

    @Test
    void releasedLayerZeroIsDenseAndTheRestMoe() {
        ModelConfig c = released();
        assertEquals(MlpKind.DENSE, c.mlpKind(0));
        for (int l = 1; l < 93; l++) assertEquals(MlpKind.MOE, c.mlpKind(l), "layer " + l);
        assertEquals(92, c.moeLayerCount());
    }

    @Test
    void releasedAttnResBoundariesAndCapacity() {
        ModelConfig c = released();
        assertEquals(List.of(0, 12, 24, 36, 48, 60, 72, 84), c.attnResBoundaries());
        for (int l = 0; l < 93; l++) assertEquals(l % 12 == 0, c.isAttnResBoundary(l), "layer " + l);
        assertEquals(9, c.snapshotCapacity());
    }

    @Test
    void releasedDerivedWidths() {
        ModelConfig c = released();
        assertEquals(12288, c.kdaWidth());
        assertEquals(192, c.mlaQkHeadDim());
        assertEquals(256, c.mlaKvHeadDim());
        assertEquals(576, c.mlaKvAWidth());
        assertEquals(6144, c.sharedIntermediate());
    }

    @Test
    void releasedSummaryLine() {
        assertEquals("config: " + RELEASED + " (nested shape) | hidden=7168 layers=93 vocab=163840 | 24 MLA + 69 KDA"
                + " | experts 896 top 16 shared 2 | latent=3584", released().summary());
    }

    @Test
    void moeLayerFreqTwoSkipsOddLayers() throws IOException {
        var root = (ObjectNode) new ObjectMapper().readTree(RELEASED.toFile());
        ((ObjectNode) root.get("text_config")).put("moe_layer_freq", 2);
        ModelConfig c = ConfigReader.read(root, "freq2");
        assertEquals(MlpKind.DENSE, c.mlpKind(1));
        assertEquals(MlpKind.MOE, c.mlpKind(2));
        assertEquals(46, c.moeLayerCount());
    }

    @Test
    void anAbsentBooleanTakesItsDefaultAndSaysSo() throws IOException {
        var root = (ObjectNode) new ObjectMapper().readTree(RELEASED.toFile());
        ((ObjectNode) root.get("text_config")).remove("latent_moe_use_norm");
        ModelConfig c = ConfigReader.read(root, "nonorm");
        assertTrue(c.latentNorm());
        assertEquals(List.of("latent_moe_use_norm=true"), c.defaulted());
        assertTrue(c.summary().endsWith(" | defaulted: latent_moe_use_norm=true"), c.summary());
    }

    @Test
    void anImplausiblySizedFileIsRefusedUnread(@TempDir Path dir) throws IOException {
        Path big = dir.resolve("config.json");
        try (var f = new RandomAccessFile(big.toFile(), "rw")) {
            f.setLength(ConfigReader.MAX_CONFIG_BYTES + 1); // sparse: nothing is written
        }
        var e = assertThrows(ConfigException.class, () -> ConfigReader.read(big));
        assertTrue(e.getMessage().contains("implausible config size"), e.getMessage());
    }

    @Test
    void invalidJsonNamesThePath(@TempDir Path dir) throws IOException {
        for (String text : List.of("{\"hidden_size\": 7168", "{} {}", "{\"a\": 1, \"a\": 2}", "", "[1, 2]")) {
            Path p = dir.resolve("bad.json");
            Files.writeString(p, text);
            var e = assertThrows(ConfigException.class, () -> ConfigReader.read(p), text);
            assertTrue(e.getMessage().contains(p.toString()), e.getMessage());
            assertEquals(1, e.problems().size(), e.getMessage());
        }
    }

    @Test
    void aMissingFileIsAConfigException(@TempDir Path dir) {
        var e = assertThrows(ConfigException.class, () -> ConfigReader.read(dir.resolve("absent.json")));
        assertTrue(e.getMessage().contains("absent.json"), e.getMessage());
        assertFalse(e.problems().isEmpty());
    }

    @Test
    void aTiedLmHeadOrAnotherRouterIsRefusedNamingWhatItWouldMean() throws IOException {
        ObjectNode root = (ObjectNode) new ObjectMapper().readTree(RELEASED.toFile());
        ObjectNode text = (ObjectNode) root.get("text_config");
        root.put("tie_word_embeddings", true);
        text.put("tie_word_embeddings", true);
        text.put("topk_method", "greedy");
        ConfigException e = assertThrows(ConfigException.class, () -> ConfigReader.read(root, "edited"));
        assertTrue(e.problems().contains("text_config.tie_word_embeddings = true: this engine reads a separate lm_head and implements only "
                + "tie_word_embeddings = false"), e.problems().toString());
        assertTrue(e.problems().contains("text_config.topk_method = \"greedy\" describes a different router: this engine implements only "
                + "topk_method = \"noaux_tc\""), e.problems().toString());
    }
}
