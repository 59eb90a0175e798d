package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.dump.ReferenceDump;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.JudgedCandidate;
import k3j.harness.Project;
import k3j.harness.ScaleCopies;
import k3j.harness.ScaleFixture;
import k3j.harness.ScaleTrunk;
import k3j.harness.Tamper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: at the released model's widths, a reference k3j wrote of the scale fixture ({@code k3 MODEL --ids PROMPT
 * --dump-reference DIR} under the scale gates' capped plan: the trunk streamed through one ring slot, the routed
 * experts through a cache of a few slots) judges candidates as the fixture's torch reference does: for k3j's clean
 * candidate and for the broken copies the scale gates make, the same verdict, the same first failing layer and
 * stage, the same category, the same logit finding, and every layer's outcome the same. The clean candidate is green
 * against both; a wrong k3j reference (L3 attn_out 1% off) turns it red, so the equality can fail.
 *
 * <p>The broken copies ({@link Corruptions#write}): the one ScaleBisectGate bisects (L1 KDA v_proj and g_proj
 * swapped, L2 shared-expert gate_proj and up_proj swapped, L3 MLA q_a_proj stored transposed) and the routed-expert
 * pair ScaleConformanceGate swaps ({@code bounded_memory.bisect} of the fixture's manifest). Each candidate is k3j's
 * own {@code --dump-activations} of the copy (resident, as the resident conformance runs). The scale reference
 * holds no generated ids (5 ids, {@code generated_ids} empty): the k3j reference has none either, and greedy ids are
 * not judged here. Data: the fixture ({@link ScaleFixture#underTest()}), its dump {@code reference-dumps/scale-k3},
 * the plan in {@code oracle-fixtures/scale-k3/manifest.json}; the reference and candidates under {@code build/}, the
 * copies from {@link ScaleCopies} (made once per test JVM, shared with ScaleBisectGate and ScaleConformanceGate).
 */
@Tag("scale")
@Epic("scale: the released widths")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class K3jReferenceScaleGate {
    /** A copy of the fixture with these corruptions; its candidate is written to {@code build/k3j-reference/scale-candidates/<folder>}. */
    record Case(String name, String folder, List<Corruption> corruptions) {
        @Override
        public String toString() {
            return name;
        }
    }

    static Path model, torch, k3j, trunk, work, clean;
    static JsonNode bounds;
    static String prompt;

    @BeforeAll
    static void writeReferenceAndCleanCandidate() throws Exception {
        model = ScaleFixture.underTest().dir();
        torch = Project.dump("scale-k3");
        bounds = Project.json(Project.fixture("scale-k3/manifest.json")).path("bounded_memory");
        if (bounds.isMissingNode()) throw new AssertionError("gate data missing: oracle-fixtures/scale-k3/manifest.json has no bounded_memory section");
        prompt = Arrays.stream(ReferenceDump.open(torch).promptIds()).mapToObj(Integer::toString).collect(Collectors.joining(","));
        work = Files.createDirectories(Project.root().resolve("build/k3j-reference"));
        trunk = ScaleTrunk.of(model);   // packed once per test JVM, shared by the scale gates
        k3j = work.resolve("scale-k3");
        List<String> args = new ArrayList<>(List.of(model.toString(), "--ids", prompt, "--gen", "0", "--threads", "2", "--reference", torch.toString(),
                "--dump-reference", k3j.toString(), "--trunk", trunk.toString(), "--preset", bounds.path("preset").asText(), "--trunk-gb",
                bounds.path("trunk_gb").asText(), "--trunk-ring", bounds.path("trunk_ring").asText(), "--cache-gb", bounds.path("cache_gb").asText()));
        long t0 = System.nanoTime();
        ChildJvm.Result r = ChildJvm.run(Map.of(), 1800, "k3j.cli.K3", args.toArray(String[]::new));
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.println("== k3 --dump-reference (capped), " + String.format(Locale.ROOT, "%.1f s", secs) + "\n" + r.output());
        if (r.exit() != 0) throw new AssertionError("k3 --dump-reference under the capped plan failed (exit " + r.exit() + "):\n" + r.output());
        clean = candidate(model, "clean");
    }

    @AfterAll
    static void deleteCandidates() throws IOException {
        if (work != null) Project.deleteTree(Files.exists(work.resolve("scale-candidates")) ? work.resolve("scale-candidates") : null);
    }

    /** {@code k3 COPY --ids PROMPT --gen 0 --reference TORCH --dump-activations DIR}, resident as the resident conformance runs. */
    static Path candidate(Path copy, String name) throws IOException, InterruptedException {
        Path out = work.resolve("scale-candidates").resolve(name);
        Files.createDirectories(out.getParent());
        long t0 = System.nanoTime();
        ChildJvm.Result r = ChildJvm.run(bounds.path("resident_heap").asText(), Map.of("k3.memAvailableBytes", bounds.path("resident_mem_available_bytes").asText()),
                1800, "k3j.cli.K3", copy.toString(), "--ids", prompt, "--gen", "0", "--threads", "2", "--reference", torch.toString(), "--dump-activations", out.toString());
        double secs = (System.nanoTime() - t0) / 1e9;
        System.out.println("== k3 --dump-activations (" + name + "), " + String.format(Locale.ROOT, "%.1f s", secs) + "\n" + r.output());
        if (r.exit() != 0) throw new AssertionError("k3 --dump-activations of " + name + " failed (exit " + r.exit() + "):\n" + r.output());
        return out;
    }

    static Stream<Case> cases() {
        JsonNode pair = Project.json(Project.fixture("scale-k3/manifest.json")).path("bounded_memory").path("bisect");
        int layer = pair.path("layer").asInt(), a = pair.path("experts").path(0).asInt(), b = pair.path("experts").path(1).asInt();
        List<Corruption> experts = new ArrayList<>();
        for (String part : List.of("w1.weight_packed", "w1.weight_scale", "w2.weight_packed", "w2.weight_scale", "w3.weight_packed", "w3.weight_scale")) {
            experts.add(new Corruption.Swap(layer, "block_sparse_moe.experts." + a + "." + part, "block_sparse_moe.experts." + b + "." + part));
        }
        return Stream.of(
                new Case("L1 KDA v_proj <-> g_proj, L2 shared-expert gate_proj <-> up_proj, L3 MLA q_a_proj stored transposed", "three-layers", List.of(
                        new Corruption.Swap(1, "self_attn.v_proj.weight", "self_attn.g_proj.weight"),
                        new Corruption.Swap(2, "block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight"),
                        new Corruption.Transpose(3, "self_attn.q_a_proj.weight"))),
                new Case("L" + layer + " routed experts " + a + " <-> " + b, "expert-pair", experts));
    }

    @Test
    @Order(1)
    void theCleanCandidateIsGreenAgainstBoth() {
        Evidence.caseName("k3j reference at scale: the clean candidate green against torch and k3j");
        Allure.feature("k3j reference");
        JudgedCandidate byTorch = JudgedCandidate.of(clean, torch), byK3j = JudgedCandidate.of(clean, k3j);
        Evidence.parameter("against torch", byTorch.toString());
        Evidence.parameter("against k3j", byK3j.toString());
        assertTrue(byTorch.green(), "k3j's candidate of the fixture conforms to the torch reference: " + byTorch);
        assertEquals(byTorch, byK3j, "the k3j reference's verdict, first divergence, category, logit finding and every layer's outcome are the torch reference's");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    @Order(4)
    void eachBrokenCopyIsJudgedByTheK3jReferenceAsByTheTorchReference(Case c) throws Exception {
        Evidence.caseName("k3j reference at scale judges " + c.name());
        Allure.feature("k3j reference");
        Path copy = ScaleCopies.of(model, c.folder(), c.corruptions());   // shared with the scale gate that breaks the fixture the same way
        Path candidate = candidate(copy, c.folder());
        JudgedCandidate byTorch = JudgedCandidate.of(candidate, torch), byK3j = JudgedCandidate.of(candidate, k3j);
        Evidence.parameter("against torch", byTorch.toString());
        Evidence.parameter("against k3j", byK3j.toString());
        List<Integer> corrupted = c.corruptions().stream().map(Corruption::layer).distinct().sorted().toList();
        assertFalse(byTorch.green(), "a broken copy fails against the torch reference: " + byTorch);
        assertEquals(corrupted.getFirst(), byTorch.firstLayer(), "first at the first corrupted layer against torch: " + byTorch);
        for (int layer : corrupted) {
            assertFalse(byTorch.layers().get(layer).endsWith(" conforms"), "L" + layer + " is corrupted and must fail against torch: " + byTorch);
        }
        assertEquals(byTorch, byK3j, "the k3j reference's verdict, first divergence, category, logit finding and every layer's outcome are the torch reference's");
    }

    @Test
    @Order(2)
    void theReferenceHoldsNoGeneratedIdsAsItsSource() {
        Evidence.caseName("k3j reference at scale: the source's shape (5 ids, no generated ids), k3j named as producer");
        ReferenceDump d = ReferenceDump.open(k3j), src = ReferenceDump.open(torch);
        assertFalse(d.torch(), "a k3j-written reference is not torch's");
        assertTrue(d.producer().startsWith("reference: k3j "), d.producer());
        assertEquals(src.manifestSha256(), d.inputsFromSha256(), "its inputs are the torch reference's");
        assertEquals(0, src.generatedIds().length, "the scale reference has no generated ids (this gate's premise)");
        assertEquals(0, d.generatedIds().length, "nor does k3j's");
        assertTrue(Arrays.equals(src.promptIds(), d.promptIds()), "the same prompt");
        assertEquals(Arrays.toString(src.shape("logits")), Arrays.toString(d.shape("logits")), "the logits at the released vocabulary");
    }

    @Test
    @Order(3)
    void aWrongK3jReferenceFailsTheCleanCandidate() throws IOException {
        Evidence.caseName("k3j reference at scale: a wrong one (L3 attn_out 1% off) fails the clean candidate");
        Path tmp = Files.createTempDirectory(work, "wrong");
        try {
            Path wrong = Tamper.copy(k3j, tmp.resolve("wrong"));
            Tamper.scale(wrong, "layers.3.attn_out", 1.01f);
            JudgedCandidate byTorch = JudgedCandidate.of(clean, torch), bad = JudgedCandidate.of(clean, wrong);
            Evidence.parameter("against the wrong k3j reference", bad.toString());
            assertFalse(bad.green(), "the clean candidate fails against a wrong reference: " + bad);
            assertEquals(3, bad.firstLayer(), "first at the wrong layer: " + bad);
            assertEquals("attn_out", bad.firstStage(), "first at the wrong stage: " + bad);
            assertNotEquals(byTorch, bad, "the gate's equality fails for a wrong k3j reference");
        } finally {
            Project.deleteTree(tmp);
        }
    }
}
