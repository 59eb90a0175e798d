package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.compare.Conformance;
import k3j.compare.ExpertSweep;
import k3j.compare.LayerReport;
import k3j.dump.CandidateDump;
import k3j.dump.ReferenceDump;
import k3j.harness.Evidence;
import k3j.harness.OracleLayers;
import k3j.harness.Project;
import k3j.harness.Tamper;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.kernels.Workers;
import k3j.model.Model;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.apache.commons.compress.compressors.gzip.GzipCompressorOutputStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A dump is data, not a suggestion: its manifest is strict JSON (a key given twice, a value of the wrong JSON type,
 * text after the object: refused naming the key), an archive holds one manifest, and no tolerance in it can loosen a
 * bound the harness derives itself. Each case is a copy of the 93-layer oracle's dump altered the way a hostile or
 * careless writer would (sha256 list kept consistent), judged on layer 40 (a KDA MoE layer) of the untouched oracle.
 */
@Tag("faults")
@Epic("faults")
class StrictDumpGate {
    @TempDir
    Path tmp;

    static Stream<Arguments> refusedManifests() {
        return Stream.of(
                text("format_version given twice", t -> t.replaceFirst("\"format_version\" *: *1", "\"format_version\": 1, \"format_version\": 2"),
                        "Duplicate field 'format_version'"),
                json("format_version as the string \"1\"", m -> m.put("format_version", "1"), "format_version is the string \"1\", must be an integer"),
                json("format_version as true", m -> m.put("format_version", true), "format_version is true, must be an integer"),
                json("format_version as 1.9", m -> m.put("format_version", 1.9), "format_version is the number 1.9, must be an integer"),
                text("a second object after the manifest", t -> t + "\n{\"format\": \"k3ref-dump\"}\n", "a second JSON value after the first"),
                json("layers[0].snapshots_attn as the string \"0\"", m -> ((ObjectNode) m.path("layers").get(0)).put("snapshots_attn", "0"),
                        "layers[0].snapshots_attn is the string \"0\", must be an integer"),
                json("layers[40].boundary as the number 0", m -> ((ObjectNode) m.path("layers").get(40)).put("boundary", 0),
                        "layers[40].boundary is the number 0, must be true or false"),
                json("an array shape holding a string", m -> ((ObjectNode) m.path("arrays").path("layers.40.attn_out")).putArray("shape").add("16").add(40),
                        "arrays.layers.40.attn_out.shape[0] is the string \"16\", must be an integer"),
                json("a tolerance as a string", m -> stage(m, 40, "attn_out").put("atol_layer", "1e30"),
                        "tolerances.layers[40].stages.attn_out.atol_layer is the string \"1e30\", must be a finite number"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedManifests")
    @Feature("reference dump")
    @DisplayName("a lenient manifest (duplicate key, wrong JSON type, trailing text) is refused at open, naming the key")
    void aLenientManifestIsRefusedAtOpen(String name, Consumer<Path> tamper, String expected) {
        Path dump;
        try {
            // opening reads the manifest alone: a copy of it is the whole dump this case needs
            dump = Files.createDirectories(tmp.resolve("manifest-only"));
            Files.copy(Project.dump("mini-k3-93").resolve("manifest.json"), dump.resolve("manifest.json"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ReferenceDump.open(dump);   // the untouched copy opens
        tamper.accept(dump);
        ConformException e = assertThrows(ConformException.class, () -> ReferenceDump.open(dump), name + " was accepted");
        Evidence.text("refusal", e.getMessage());
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    static Stream<Arguments> looseTolerances() {
        return Stream.of(
                json("kda_state atol_layer 1e30, the reference state doubled", m -> stage(m, 40, "kda_state").put("atol_layer", 1e30),
                        "tolerances.layers[40].stages.kda_state.atol_layer = 1.00000e+30 is looser than the harness's own bound"),
                json("kda_state atol_layer -1, the reference state doubled", m -> stage(m, 40, "kda_state").put("atol_layer", -1.0),
                        "tolerances.layers[40].stages.kda_state.atol_layer = -1.0 is not a positive finite number"),
                json("moe_choice atol_layer 1e30", m -> stage(m, 40, "moe_choice").put("atol_layer", 1e30),
                        "tolerances.layers[40].stages.moe_choice.atol_layer = 1.00000e+30 is looser than the harness's own bound"),
                json("moe_choice atol_layer 0", m -> stage(m, 40, "moe_choice").put("atol_layer", 0.0),
                        "moe_choice.atol_layer = 0.0 is not a positive finite number"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("looseTolerances")
    @Feature("reference dump")
    @DisplayName("a dump tolerance looser than the harness's own bound (or not positive) is refused, never applied")
    void aLooserToleranceIsRefused(String name, Consumer<Path> tamper, String expected) {
        Path dump = tampered(d -> {
            tamper.accept(d);
            doubled(d, "layers.40.kda_state");
        });
        ConformException e = assertThrows(ConformException.class, () -> layer(dump, 40), name + " was applied");
        Evidence.text("refusal", e.getMessage());
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("the reference state doubled fails L40 under the dump's own (or the harness's) bound")
    void aDoubledReferenceStateFailsTheLayer() {
        Path dump = tampered(d -> doubled(d, "layers.40.kda_state"));
        LayerReport r = layer(dump, 40);
        Evidence.text("verdict", r.line());
        assertEquals(Finding.BINDING_ERROR, r.finding(), r.line());
        assertTrue(r.message().contains("kda_state"), r.message());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("an end-to-end tolerance past the binding-error line and an expert budget factor of 1e12 are refused naming the key")
    void theOracleAndExpertToleranceCeilings() {
        Path dump = tampered(d -> Tamper.manifest(d, m -> {
            stage(m, 40, "attn_out").put("atol_e2e", 1e30);
            ((ObjectNode) m.path("experts").path("budget")).put("factor", 1e12);
        }));
        ReferenceDump d = ReferenceDump.open(dump);
        ConformException e2e = assertThrows(ConformException.class, () -> d.atol(40, "attn_out", "atol_e2e"));
        assertTrue(e2e.getMessage().contains("tolerances.layers[40].stages.attn_out.atol_e2e = 1.00000e+30 is looser than the harness's own bound"), e2e.getMessage());
        d.atol(40, "attn_out", "atol_layer");   // the untouched neighbour still reads
        ConformException sweep = assertThrows(ConformException.class, () -> ExpertSweep.of(d));
        Evidence.text("refusals", e2e.getMessage() + "\n" + sweep.getMessage());
        assertTrue(sweep.getMessage().contains("budget.factor = 1.0E12 is looser than the harness's 50.0"), sweep.getMessage());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("a moe_choice that does not rank the reference's own moe_idx first is refused (a near-tie claim must match the reference's scores)")
    void aChoiceArrayInconsistentWithTheRoutingIsRefused() {
        Path dump = tampered(d -> {
            int[] idx = ints(d, "layers.40.moe_idx");
            int experts = ReferenceDump.open(d).shape("layers.40.moe_choice")[1];
            Tamper.setFloat(d, "layers.40.moe_choice", idx[0], -10f);   // token 0: the reference's first pick now scores lowest
            assertTrue(idx[0] < experts);
        });
        ConformException e = assertThrows(ConformException.class, () -> layer(dump, 40));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("layers.40") && e.getMessage().contains("moe_choice"), e.getMessage());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("router bias x(-5) on L40 with moe_choice atol 1e30: refused; with the dump's own atol: [binding error], not [near-tie]")
    void aScaledRouterBiasIsABindingErrorNotANearTie() {
        Path model = tmp.resolve("biased");
        Corruptions.write(Project.fixture("mini-k3-93"), model, List.of(new Corruption.Scale(40, "block_sparse_moe.gate.e_score_correction_bias", -5f)));
        Path loose = tampered(d -> Tamper.manifest(d, m -> stage(m, 40, "moe_choice").put("atol_layer", 1e30)));
        try (Model biased = Model.open(model)) {
            ConformException e = assertThrows(ConformException.class,
                    () -> Conformance.of(biased.forward(oracle.workers()), ReferenceDump.open(loose)).layer(40));
            assertTrue(e.getMessage().contains("moe_choice.atol_layer = 1.00000e+30 is looser"), e.getMessage());
            LayerReport r = Conformance.of(biased.forward(oracle.workers()), ReferenceDump.open(Project.dump("mini-k3-93"))).layer(40);
            Evidence.text("verdicts", e.getMessage() + "\n" + r.line());
            assertEquals(Finding.BINDING_ERROR, r.finding(), r.line());
            assertTrue(r.message().contains("routing differs"), r.message());
        }
    }

    @Test
    @Feature("reference dump")
    @DisplayName("a .tar.gz holding two manifest.json entries is refused (tar xf keeps the second; the harness would judge the first)")
    void anArchiveWithTwoManifestsIsRefused() throws IOException {
        Path src = Project.dump("mini-k3-93");
        Path tgz = tmp.resolve("two-manifests.tar.gz");
        byte[] manifest = Files.readAllBytes(src.resolve("manifest.json"));
        try (OutputStream os = Files.newOutputStream(tgz); TarArchiveOutputStream tar = new TarArchiveOutputStream(new GzipCompressorOutputStream(os))) {
            entry(tar, "manifest.json", manifest);
            entry(tar, "ids.bin", Files.readAllBytes(src.resolve("ids.bin")));
            entry(tar, "manifest.json", new String(manifest, java.nio.charset.StandardCharsets.UTF_8).replace("k3ref-dump", "k3ref-dump ").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        ConformException e = assertThrows(ConformException.class, () -> ReferenceDump.open(tgz));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("holds two manifests"), e.getMessage());
    }

    @Test
    @Feature("candidate dump")
    @DisplayName("a candidate manifest is as strict: format_version \"1\", a duplicate key, layers[].index as a string are refused")
    void aLenientCandidateManifestIsRefused() throws IOException {
        String ok = """
                {"format": "k3-candidate", "format_version": 1, "layer_inputs": "reference",
                 "engine": {"name": "x", "precision": "float32"}, "reference": {"manifest_sha256": "%s"},
                 "layers": [{"index": 0, "mixer": "kda", "mlp": "dense"}], "arrays": {}}""".formatted("0".repeat(64));
        assertEquals("x (float32)", CandidateDump.open(candidate("ok", ok)).engine());
        for (String[] c : new String[][] {
                {"\"format_version\": 1", "\"format_version\": \"1\"", "format_version is the string \"1\", must be an integer"},
                {"\"layer_inputs\"", "\"layer_inputs\": \"reference\", \"layer_inputs\"", "Duplicate field 'layer_inputs'"},
                {"\"index\": 0", "\"index\": \"0\"", "layers[0].index is the string \"0\", must be an integer"},
                {"\"precision\": \"float32\"", "\"precision\": 32", "engine.precision is the number 32, must be a string"}}) {
            Path dir = candidate("bad" + c[0].hashCode(), ok.replace(c[0], c[1]));
            ConformException e = assertThrows(ConformException.class, () -> CandidateDump.open(dir), c[1]);
            assertTrue(e.getMessage().contains(c[2]), e.getMessage());
        }
    }

    @Test
    @Feature("candidate dump")
    @DisplayName("an .npz candidate that numpy would read otherwise is refused: a key twice in an .npy header, a central directory pointing past the local entries, no central directory, text")
    void anNpzReadOtherwiseByNumpyIsRefused() throws IOException {
        byte[] zip = Files.readAllBytes(Project.fuzzSeed("candidate", "valid-two-stages-npz"));
        assertEquals(1, CandidateDump.open(Files.write(tmp.resolve("ok.npz"), zip)).manifest().path("format_version").asInt(), "the base is read");
        String stage = "layers.0.attn_norm.npy";
        byte[] npy = k3j.harness.ZipParts.entry(zip, stage);
        String[][] cases = {
                {"a key twice", "key 'shape' given twice (numpy would take the last)"},
                {"an extra key", "header keys"},
                {"the central record pointing past the local entries", "after a gap from byte"},
                {"no central directory", "no end-of-central-directory record: the central directory is missing"},
                {"text", "not a zip file"}};
        byte[][] files = {
                k3j.harness.ZipParts.replaced(zip, stage, k3j.harness.ZipParts.withHeader(npy, h -> h.replace("}", " 'shape': (1, 1), }"))),
                k3j.harness.ZipParts.replaced(zip, stage, k3j.harness.ZipParts.withHeader(npy, h -> h.replace("}", " 'note': 'x', }"))),
                k3j.harness.ZipParts.centralPointingElsewhere(zip, stage, k3j.harness.ZipParts.scaled(npy, 50f)),
                k3j.harness.ZipParts.withoutCentralDirectory(zip),
                "PK this is text".getBytes(java.nio.charset.StandardCharsets.US_ASCII)};
        for (int i = 0; i < cases.length; i++) {
            Path f = Files.write(tmp.resolve("plant" + i + ".npz"), files[i]);
            ConformException e = assertThrows(ConformException.class, () -> CandidateDump.open(f), cases[i][0]);
            Evidence.text("refused: " + cases[i][0], e.getMessage());
            assertTrue(e.getMessage().contains(cases[i][1]), cases[i][0] + ": " + e.getMessage());
        }
        // the replacement itself is read: only the plant is refused
        CandidateDump.open(Files.write(tmp.resolve("same.npz"), k3j.harness.ZipParts.replaced(zip, stage, npy)));
    }

    @Test
    @Feature("checkpoint index")
    @DisplayName("an index.json whose weight_map appears twice (the second empty) is refused, not read as the first")
    void anIndexWithTwoWeightMapsIsRefused() throws IOException {
        Path model = Tamper.copy(Project.fixture("mini-k3-93"), tmp.resolve("two-maps"));
        Path index = model.resolve("model.safetensors.index.json");
        String text = Files.readString(index).trim();
        Files.writeString(index, text.substring(0, text.length() - 1) + ", \"weight_map\": {}}");
        CheckpointException e = assertThrows(CheckpointException.class, () -> CheckpointIndex.open(model));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("\"weight_map\" twice"), e.getMessage());
    }

    // ---------------------------------------------------------------------------------------------

    private static Arguments json(String name, Consumer<ObjectNode> edit, String expected) {
        return Arguments.of(name, (Consumer<Path>) d -> Tamper.manifest(d, edit), expected);
    }

    private static Arguments text(String name, UnaryOperator<String> edit, String expected) {
        return Arguments.of(name, (Consumer<Path>) d -> {
            try {
                Path m = d.resolve("manifest.json");
                Files.writeString(m, edit.apply(Files.readString(m)));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }, expected);
    }

    private static ObjectNode stage(ObjectNode m, int layer, String stage) {
        return (ObjectNode) m.path("tolerances").path("layers").get(layer).path("stages").path(stage);
    }

    /** Every float of array {@code key} doubled, sha256 updated. */
    private static void doubled(Path dump, String key) {
        try {
            byte[] b = Files.readAllBytes(dump.resolve(key + ".bin"));
            ByteBuffer f = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < b.length; i += 4) f.putFloat(i, 2 * f.getFloat(i));
            Tamper.replace(dump, key, b);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int[] ints(Path dump, String key) {
        try {
            byte[] b = Files.readAllBytes(dump.resolve(key + ".bin"));
            int[] v = new int[b.length / 4];
            ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).asIntBuffer().get(v);
            return v;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void entry(TarArchiveOutputStream tar, String name, byte[] bytes) throws IOException {
        TarArchiveEntry en = new TarArchiveEntry(name);
        en.setSize(bytes.length);
        tar.putArchiveEntry(en);
        tar.write(bytes);
        tar.closeArchiveEntry();
    }

    private Path candidate(String name, String manifest) throws IOException {
        Path dir = Files.createDirectories(tmp.resolve(name));
        Files.writeString(dir.resolve("manifest.json"), manifest);
        return dir;
    }

    private Path tampered(Consumer<Path> tamper) {
        return OracleLayers.tamperedDump(tmp.resolve("dump-" + System.nanoTime()), tamper);
    }

    private static OracleLayers oracle;

    @BeforeAll
    static void bindTheOracleOnce() {
        oracle = OracleLayers.open();
    }

    @AfterAll
    static void close() {
        if (oracle != null) oracle.close();
    }

    /** Layer {@code layer} of the (shared, untouched) oracle against a dump, checked as {@code k3 conform} checks it. */
    private static LayerReport layer(Path dump, int layer) {
        return oracle.layer(dump, layer);
    }
}
