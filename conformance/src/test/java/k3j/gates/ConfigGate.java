package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Epic;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.LayerKind;
import k3j.config.MlpKind;
import k3j.config.ModelConfig;
import k3j.harness.Evidence;
import k3j.harness.Project;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The config reader accepts the released, tiny nested and tiny flat configs with the right layer map,
 * and refuses every mutant naming what is wrong (docs/semantics.md §1, §1.4). The cases, one base
 * config plus one change each, are written by oracle-fixtures/config/gen_cases.py, which also computes
 * the accepted configs' facts by its own reading of the rules.
 */
@Tag("config")
@Epic("config")
class ConfigGate {

    static Stream<Arguments> cases() {
        JsonNode cases = Project.json(Project.fixture("config/cases.json")).path("cases");
        if (!cases.isArray() || cases.isEmpty()) fail("oracle-fixtures/config/cases.json holds no cases: regenerate with gen_cases.py");
        var out = new ArrayList<Arguments>();
        for (JsonNode c : cases) out.add(Arguments.of(c.path("name").asText(), c));
        return out.stream();
    }

    @DisplayName("config case")
    @ParameterizedTest(name = "{0}", quoteTextArguments = false)
    @MethodSource("cases")
    void readerDecidesAsTheCaseSays(String name, JsonNode c) {
        Path file = Project.fixture(c.path("file").asText());
        Evidence.parameter("base", c.path("base").asText());
        Evidence.parameter("change", c.path("change").toString());
        Evidence.parameter("expect", c.path("expect").asText());
        switch (c.path("expect").asText()) {
            case "accept" -> accepted(file, c.path("facts"));
            case "refuse" -> refused(file, c);
            default -> fail("case " + name + ": expect must be accept or refuse, not " + c.path("expect"));
        }
    }

    private static void accepted(Path file, JsonNode facts) {
        ModelConfig config;
        try {
            config = ConfigReader.read(file);
        } catch (ConfigException e) {
            Evidence.text("refusal", e.getMessage());
            throw new AssertionError("a valid config was refused:\n" + e.getMessage(), e);
        }
        Evidence.text("summary", config.summary());
        Evidence.json("facts expected", facts);
        for (String k : List.of("layer_map", "mla_layers", "kda_layers", "moe_layers", "dense_layers", "attn_res_boundaries", "snapshot_capacity", "summary_after_source")) {
            if (!facts.has(k)) fail("an accept case's facts lack '" + k + "' (it would compare against a default): regenerate with gen_cases.py");
        }
        int layers = config.layerCount();
        var dense = new ArrayList<Integer>();
        for (int l = 0; l < layers; l++) if (config.mlpKind(l) == MlpKind.DENSE) dense.add(l);
        int mla = 0;
        for (int l = 0; l < layers; l++) if (config.layerKind(l) == LayerKind.MLA) mla++;
        assertEquals(facts.path("layer_map").asText(), config.layerMap(), "layer map (K = KDA, M = MLA, zero-based)");
        assertEquals(facts.path("mla_layers").asInt(), mla, "MLA layers");
        assertEquals(facts.path("mla_layers").asInt(), config.mlaLayerCount(), "mlaLayerCount()");
        assertEquals(facts.path("kda_layers").asInt(), config.kdaLayerCount(), "kdaLayerCount()");
        assertEquals(facts.path("moe_layers").asInt(), config.moeLayerCount(), "MoE layers");
        assertEquals(ints(facts.path("dense_layers")), dense, "dense layers");
        assertEquals(ints(facts.path("attn_res_boundaries")), config.attnResBoundaries(), "AttnRes boundaries");
        assertEquals(facts.path("snapshot_capacity").asInt(), config.snapshotCapacity(), "snapshot capacity");
        assertEquals("config: " + file + " " + facts.path("summary_after_source").asText(), config.summary(), "summary line");
    }

    private static void refused(Path file, JsonNode c) {
        String message;
        try {
            ModelConfig config = ConfigReader.read(file);
            Evidence.text("summary", config.summary());
            throw new AssertionError("a config that must be refused was accepted: " + config.summary());
        } catch (ConfigException e) {
            message = e.getMessage();
            assertEquals(e.problems().size(), message.lines().count() - 2, "one line per problem, plus header and footer");
        }
        Evidence.text("refusal", message);
        List<String> fragments = list(c.path("fragments"), JsonNode::asText);
        Evidence.json("fragments expected", c.path("fragments"));
        if (fragments.isEmpty()) fail("a refuse case names no fragments, so any refusal would pass: regenerate with gen_cases.py");
        int from = 0;
        for (String f : fragments) {
            int at = message.indexOf(f, c.path("ordered").asBoolean() ? from : 0);
            assertTrue(at >= 0, "the refusal must say \"" + f + "\"" + (c.path("ordered").asBoolean() ? " (in this order)" : "")
                    + ", but it was:\n" + message);
            from = at + f.length();
        }
        for (JsonNode absent : c.path("absent")) {
            assertFalse(message.contains(absent.asText()), "the refusal must NOT say \"" + absent.asText() + "\":\n" + message);
        }
    }

    private static List<Integer> ints(JsonNode array) {
        return list(array, JsonNode::asInt);
    }

    private static <T> List<T> list(JsonNode array, Function<JsonNode, T> f) {
        assertTrue(array.isArray(), "cases.json: expected an array, got " + array);
        var out = new ArrayList<T>();
        for (JsonNode n : array) out.add(f.apply(n));
        return out;
    }
}
