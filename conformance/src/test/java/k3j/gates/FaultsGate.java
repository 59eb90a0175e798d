package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.Tamper;
import k3j.kernels.Workers;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The harness cannot pass what it did not check, and a fault during a run never ends in plausible output.
 * Each case injects one fault into a copy of the checked-in 93-layer oracle (its reference dump, its shards,
 * its trunk, the disk under an output) and asserts the refusal: its exit code or finding, the rule named, no
 * token printed after the fault, no complete-looking output left behind.
 */
@Tag("faults")
@Epic("faults")
class FaultsGate {
    @TempDir
    Path tmp;

    // ---------------------------------------------------------------------------------------------
    // a tampered reference dump (sha256 list kept consistent, so only the rule under test can catch it)

    @Test
    @Feature("reference dump")
    @DisplayName("a NaN in layers.40.attn_out fails L40 as [non-finite], with both finite counts")
    void aNanInTheReferenceFailsTheLayer() {
        Path dump = tamperedDump(d -> Tamper.setFloat(d, "layers.40.attn_out", 17, Float.NaN));
        LayerReport r = layer(dump, 40);
        Evidence.text("verdict", r.line());
        assertEquals(Finding.NON_FINITE, r.finding(), r.line());
        assertTrue(r.message().contains("attn_out is not finite (finite ref 639/640, engine 640/640)"), r.message());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("+Inf in layers.40.mlp_out fails L40 as [non-finite]")
    void anInfinityInTheReferenceFailsTheLayer() {
        Path dump = tamperedDump(d -> Tamper.setFloat(d, "layers.40.mlp_out", 3, Float.POSITIVE_INFINITY));
        LayerReport r = layer(dump, 40);
        assertEquals(Finding.NON_FINITE, r.finding(), r.line());
        assertTrue(r.message().contains("mlp_out is not finite"), r.message());
    }

    static Stream<Arguments> refusedDumps() {
        return Stream.of(
                refused("a truncated kda_state (sha256 updated)", d -> Tamper.truncate(d, "layers.40.kda_state", 100), "layers.40.kda_state.bin: 100 bytes"),
                refused("a truncated q_conv_state", d -> Tamper.truncate(d, "layers.40.q_conv_state", 8), "layers.40.q_conv_state.bin: 8 bytes"),
                refused("a truncated moe_choice (never compared)", d -> Tamper.truncate(d, "layers.40.moe_choice", 4), "layers.40.moe_choice.bin: 4 bytes"),
                refused("a truncated mla_kv (never compared)", d -> Tamper.truncate(d, "layers.39.mla_kv", 12), "layers.39.mla_kv.bin: 12 bytes"),
                refused("a 7-byte final_norm.bin", d -> Tamper.truncate(d, "final_norm", 7), "final_norm.bin: 7 bytes"),
                refused("an empty ids.bin", d -> Tamper.truncate(d, "ids", 0), "ids.bin: 0 bytes"),
                refused("a manifest with every sha256 removed", d -> Tamper.manifest(d, m -> m.path("arrays").forEach(a -> ((ObjectNode) a).remove("sha256"))),
                        "has no sha256"),
                refused("an array the harness does not know", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("arrays")).set("layers.40.extra",
                        m.path("arrays").path("layers.40.attn_out").deepCopy())), "array 'layers.40.extra' is neither compared nor listed as unused"),
                refused("a missing array", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("arrays")).remove("layers.40.v_conv_state")),
                        "array 'layers.40.v_conv_state' is missing"),
                refused("budget.factor = 1e12", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("budget")).put("factor", 1e12)
                        ), "budget.factor = 1.0E12 is looser than the harness's 50.0"),
                refused("every width set to 2^31-1, stored budgets recomputed to match", d -> Tamper.manifest(d, m -> {
                    double wide = 1.2e-7 * Math.sqrt(Integer.MAX_VALUE) * 50;
                    m.path("budget").path("stages").forEach(s -> ((ObjectNode) s).put("width", Integer.MAX_VALUE).put("budget", wide));
                    ((ObjectNode) m.path("budget").path("logits")).put("width", Integer.MAX_VALUE).put("budget", wide);
                }), ".width = 2147483647, but the config gives"),
                refused("layers[40].mixer = mla on a KDA layer", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("layers").get(40)).put("mixer", "mla")),
                        "manifest layers[40].mixer = mla, but the model's config gives kda"),
                refused("layers[40].snapshots_attn off by one", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("layers").get(40)).put("snapshots_attn", 3)),
                        "manifest layers[40].snapshots_attn = 3, but the model's config gives 4"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedDumps")
    @Feature("reference dump")
    @DisplayName("a dump whose arrays or budget are not this model's is refused before any verdict, naming the field")
    void aTamperedDumpIsRefusedBeforeAnyVerdict(String name, Consumer<Path> tamper, String expected) {
        Path dump = tamperedDump(tamper);
        ConformException e = assertThrows(ConformException.class, () -> layer(dump, 40), name + " was not refused");
        Evidence.text("refusal", e.getMessage());
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("a half-truncated .tar.gz dump is refused saying it is truncated, not 'null'")
    void aHalfTruncatedArchiveIsRefusedByName() throws IOException {
        Path tgz = tmp.resolve("mini-k3-93.tar.gz");
        ProcessBuilder pb = new ProcessBuilder("tar", "-czf", tgz.toString(), "-C", Project.dump("mini-k3-93").toString(), ".").inheritIO();
        try {
            assertEquals(0, pb.start().waitFor());
        } catch (InterruptedException e) {
            throw new IOException(e);
        }
        byte[] b = Files.readAllBytes(tgz);
        Files.write(tgz, java.util.Arrays.copyOf(b, b.length / 2));
        ConformException e = assertThrows(ConformException.class, () -> layer(tgz, 40));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains(tgz.toString()) && !e.getMessage().endsWith("null"), e.getMessage());
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("truncated") || e.getMessage().contains("EOF"), e.getMessage());
    }

    // ---------------------------------------------------------------------------------------------

    private static Arguments refused(String name, Consumer<Path> tamper, String expected) {
        return Arguments.of(name, tamper, expected);
    }

    private Path tamperedDump(Consumer<Path> tamper) {
        Path d = Tamper.copy(Project.dump("mini-k3-93"), tmp.resolve("dump"));
        tamper.accept(d);
        return d;
    }

    private static LayerReport layer(Path dump, int layer) {
        try (Workers w = Workers.of(1); Conformance c = Conformance.open(Project.fixture("mini-k3-93"), k3j.conform.ReferenceDump.open(dump), w)) {
            return c.layer(layer);
        }
    }
}
