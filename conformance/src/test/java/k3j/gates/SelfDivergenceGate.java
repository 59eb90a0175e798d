package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.nio.file.Path;
import java.util.List;
import k3j.compare.Conformance;
import k3j.compare.SelfDivergence;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.TorchPorts;
import k3j.verdict.Finding;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Claim: {@code k3 conform --candidate A --against B} names where one engine parts from itself. The torch reference
 * run as an engine with each 2026 serving bug (a chunked prefill whose boundary drops the KDA conv state, a restore
 * from a snapshot one chunk stale, a state shared with another sequence) against the same engine run right parts at
 * the first KDA layer's attention output, at the first chunk boundary (the chunk bugs) or at position 0 (the shared
 * state), far beyond rounding; where the bits first differ (the chunked run's own rounding, before the boundary) is
 * named apart from where they part. The engine against itself does not part.
 *
 * <p>Data: {@code -Dk3.candidates=DIR} (dump_candidate.py --all-mutants writes DIR/float32 and one folder per
 * invariance mutant, whose manifest states its chunk), over reference-dumps/mini-k3-93.
 */
@Tag("ports")
@Epic("ports")
class SelfDivergenceGate {

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"chunk_drops_conv", "stale_snapshot", "state_shared"})
    @DisplayName("--against names the first divergence of each invariance mutant")
    void againstNamesEachInvarianceMutantsFirstDivergence(String mutant) throws Exception {
        Allure.feature("engine against itself");
        Path dir = TorchPorts.folder();
        JsonNode inv = Project.json(dir.resolve(mutant).resolve("manifest.json")).path("invariance");
        assertEquals(mutant, inv.path("name").asText(), "the candidate's manifest names its invariance mutant");
        int position = mutant.equals("state_shared") ? 0 : inv.path("chunk").asInt(-1);
        assertTrue(position >= 0, "the manifest states the chunk");
        int firstKda = firstKdaLayer();
        try (Conformance a = TorchPorts.candidate("float32"); Conformance b = TorchPorts.candidate(mutant)) {
            SelfDivergence d = SelfDivergence.of(a, b);
            Evidence.text("where A and B part", d.text());
            assertNotNull(d.parting(), "the mutant must part from the clean run: " + d.text());
            assertEquals(List.of(firstKda, "attn_out", position), List.of(d.parting().layer(), d.parting().stage(), d.parting().position()), d.text());
            assertEquals(Finding.BINDING_ERROR, Finding.ofRatio(d.parting().ratioToBudget()), "a lost state is far beyond rounding: " + d.text());
        }
        ChildJvm.Result r = ChildJvm.k3("conform", "--candidate", dir.resolve("float32").toString(), "--against", dir.resolve(mutant).toString(), "--no-logits");
        Evidence.text("k3 conform --against", r.output());
        assertEquals(1, r.exit(), r.output());
        assertTrue(r.output().contains("A AND B PART AT: L" + firstKda + " KDA attn_out position " + position + " "), r.output());
        assertTrue(r.output().contains("reference: torch"), "the verdict names the reference's producer: " + r.output());
    }

    @Test
    @DisplayName("an engine against itself does not part")
    void anEngineAgainstItselfDoesNotPart() throws Exception {
        Allure.feature("engine against itself");
        try (Conformance a = TorchPorts.candidate("float32"); Conformance b = TorchPorts.candidate("float32")) {
            SelfDivergence d = SelfDivergence.of(a, b);
            Evidence.text("where A and B part", d.text());
            assertNull(d.firstBits(), d.text());
            assertNull(d.parting(), d.text());
            assertTrue(d.stagesCompared() > 93, "every layer's stages compared: " + d.text());
        }
    }

    private static int firstKdaLayer() {
        for (JsonNode l : Project.json(Project.dump("mini-k3-93/manifest.json")).path("layers")) {
            if (l.path("mixer").asText().equals("kda")) return l.path("index").asInt();
        }
        throw new AssertionError("the mini-k3-93 dump lists no KDA layer");
    }
}
