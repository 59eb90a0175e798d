package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.util.List;
import java.util.stream.Stream;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.compare.LogitParity;
import k3j.harness.Evidence;
import k3j.harness.TorchPorts;
import k3j.verdict.Finding;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: a failure's category names its cause from the evidence of every layer together (docs/semantics.md §10.10),
 * not from one stage's ratio: each torch mutant of mini-k3-93 written as a candidate gets the cause its manifest
 * states ({@code mutant.cause}: a wrong constant or formula on every layer of a kind, a tensor bound from another
 * layer localised to that layer, a layer map that leaves layers unbound, a model-level mistake in the logits alone),
 * and the noise ports (Gaussian σ 0.05 on the logits, or on every stage and the logits) are precision, never a
 * binding error. A failing layer whose cause is not its manifest's fails the case.
 *
 * <p>Data: {@code -Dk3.candidates=DIR} as for the ports gate (dump_candidate.py --all-mutants): one folder per
 * mutant of the dump's table, DIR/misbound, DIR/noise-logits and DIR/noise-stages. A missing one FAILS.
 */
@Tag("ports")
@Epic("ports")
class CauseFollowsEvidenceGate {
    /** the candidates beside the dump's mutant table: a binding mutant and the noise ports */
    static final List<String> MORE = List.of("misbound", "noise-logits", "noise-stages");

    static Stream<String> ports() {
        return Stream.concat(TorchPorts.mutants(), MORE.stream());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ports")
    void eachPlantedPortGetsTheCauseItsManifestStates(String port) {
        Evidence.caseName("cause of " + port);
        Allure.feature("causes");
        try (Conformance c = TorchPorts.candidate(port)) {
            JsonNode m = c.candidateDump().manifest().path("mutant");
            String cause = m.path("cause").asText("");
            if (cause.isEmpty()) fail(port + ": the candidate's manifest states no mutant.cause (dump_candidate.py writes it)");
            Evidence.parameter("wrong", m.path("wrong").asText());
            Evidence.parameter("expected cause", cause);
            List<LayerReport> layers = TorchPorts.layers(c);
            List<LayerReport> failing = layers.stream().filter(r -> !r.conforms()).toList();
            List<Integer> binding = failing.stream().filter(r -> r.finding() == Finding.BINDING_ERROR).map(LayerReport::layer).toList();
            Evidence.parameter("failing layers", LayerSelection.format(failing.stream().map(LayerReport::layer).toList()));
            switch (cause) {
                case "logits" -> {
                    assertTrue(failing.isEmpty(), "a model-level mutant leaves every layer conforming: " + first(failing));
                    LogitParity.Result p = c.teacherForcing(false);
                    Evidence.text("logits", p.text());
                    assertNotEquals(Finding.CONFORMS, p.finding(), "the logits must fail");
                    assertNotEquals(Finding.PRECISION, p.finding(), "a wrong output mix is structured, not noise: " + p.text());
                }
                case "precision" -> {
                    assertTrue(binding.isEmpty(), "noise is never a binding error: binding errors at " + LayerSelection.format(binding));
                    assertTrue(failing.stream().allMatch(r -> r.finding() == Finding.PRECISION), "every failing layer is precision: " + first(failing));
                    LogitParity.Result p = c.teacherForcing(false);
                    Evidence.text("logits", p.text());
                    assertEquals(Finding.PRECISION, p.finding(), "noisy logits are precision:\n" + p.text());
                    if (port.equals("noise-stages")) assertEquals(layers.size(), failing.size(), "noise on every stage fails every layer");
                }
                default -> {
                    if (failing.isEmpty()) fail(port + ": no layer fails; the cause " + cause + " cannot be checked");
                    LayerReport f = failing.getFirst();
                    Evidence.parameter("first divergence", f.message());
                    assertEquals("[" + cause + "]", f.finding().tag(), "the first failing layer's category: " + f.message());
                    if (cause.equals("binding error")) {
                        assertEquals(List.of(f.layer()), binding, "a binding error is localised to its layer");
                        assertEquals(1, failing.size(), "one misbound tensor fails one layer: " + LayerSelection.format(failing.stream().map(LayerReport::layer).toList()));
                    } else {
                        assertTrue(binding.isEmpty(), "a " + cause + " is never also called a binding error: binding errors at " + LayerSelection.format(binding)
                                + "\n" + first(failing));
                    }
                }
            }
        }
    }

    static String first(List<LayerReport> failing) {
        return failing.isEmpty() ? "(none)" : failing.getFirst().message();
    }
}
