package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import k3j.dump.ReferenceDump;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.JudgedCandidate;
import k3j.harness.Project;
import k3j.harness.Tamper;
import k3j.harness.TorchPorts;
import k3j.verdict.ConformException;
import k3j.verdict.Verdict;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: a reference k3j wrote ({@code k3 MODEL --ids PROMPT --dump-reference DIR}, docs/formats.md) judges the torch
 * ports of mini-k3-93 as the torch reference does: for the float32 port, every named mutant and the misbound port,
 * the same verdict, the same first failing layer and stage, the same category (docs/semantics.md §10.10) and the
 * same logit finding. The reference is the same bits under two memory plans (resident, and the routed experts
 * through a cache of a few slots); its verdicts say "reference: k3j VERSION, not torch"; a dump that claims torch
 * while copying another's inputs, or names no producer, is refused; and a wrong k3j reference (one layer's attn_out
 * 1% off) turns the clean float32 port red, so the equality below can fail.
 *
 * <p>Data: {@code -Dk3.candidates=DIR} as for the ports gate (dump_candidate.py --all-mutants); the two references
 * are written under {@code build/k3j-reference/}. A missing candidate FAILS.
 */
@Tag("ports")
@Epic("ports")
class K3jReferenceGate {
    static final String PROMPT = "150,17,101,3,149,64,128,42";
    static Path resident, capped;

    @BeforeAll
    static void writeReferences() throws Exception {
        Path work = Project.root().resolve("build/k3j-reference");
        Files.createDirectories(work);
        resident = dumpReference(work.resolve("mini-k3-93"));
        capped = dumpReference(work.resolve("mini-k3-93-capped"), "--cache-gb", "0.001");
    }

    /** {@code k3 mini-k3-93 --ids PROMPT --gen 1 --dump-reference DIR [flags]} in a child JVM. */
    static Path dumpReference(Path dir, String... flags) throws IOException, InterruptedException {
        List<String> args = new java.util.ArrayList<>(List.of(Project.fixture("mini-k3-93").toString(), "--ids", PROMPT, "--gen", "1", "--threads", "1",
                "--reference", Project.dump("mini-k3-93").toString(), "--dump-reference", dir.toString()));
        args.addAll(List.of(flags));
        ChildJvm.Result r = ChildJvm.run(Map.of(), 900, "k3j.cli.K3", args.toArray(String[]::new));
        if (r.exit() != 0) throw new AssertionError("k3 --dump-reference " + String.join(" ", flags) + " failed (exit " + r.exit() + "):\n" + r.output());
        return dir;
    }

    static Stream<String> ports() {
        return Stream.concat(Stream.of("float32", "misbound"), TorchPorts.mutants());
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("ports")
    void eachTorchPortIsJudgedByTheK3jReferenceAsByTheTorchReference(String port) {
        Evidence.caseName("k3j reference judges " + port);
        Allure.feature("k3j reference");
        Path candidate = Project.existing(TorchPorts.folder().resolve(port));
        JudgedCandidate torch = JudgedCandidate.of(candidate, Project.dump("mini-k3-93")).headline();
        JudgedCandidate k3j = JudgedCandidate.of(candidate, resident).headline();
        Evidence.parameter("against torch", torch.toString());
        Evidence.parameter("against k3j", k3j.toString());
        if (port.equals("float32")) assertTrue(torch.green(), "the float32 port conforms to the torch reference: " + torch);
        else assertFalse(torch.green(), "a mutant fails against the torch reference: " + torch);
        assertEquals(torch, k3j, "the k3j reference's verdict, first divergence, category and logit finding are the torch reference's");
    }

    @Test
    void theReferenceIsTheSameBitsUnderTwoMemoryPlans() throws IOException {
        Evidence.caseName("k3j reference: the same bits resident and through a small expert cache");
        List<Path> files;
        try (var s = Files.list(resident)) {
            files = s.sorted().toList();
        }
        assertTrue(files.size() > 1000, "the reference holds every array: " + files.size() + " files");
        for (Path f : files) assertArrayEquals(Files.readAllBytes(f), Files.readAllBytes(capped.resolve(f.getFileName())), f.getFileName() + " differs between the plans");
        try (var s = Files.list(capped)) {
            assertEquals(files.size(), s.count(), "the same files under both plans");
        }
    }

    @Test
    void everyVerdictNamesK3jAsTheProducer() {
        Evidence.caseName("k3j reference: its producer in every verdict");
        ReferenceDump d = ReferenceDump.open(resident);
        assertFalse(d.torch(), "a k3j-written reference is not torch's");
        assertTrue(d.producer().matches("reference: k3j 0\\.\\d+\\.\\d+ \\((\\S+\\.jar sha256 [0-9a-f]{16}|classes \\(no jar\\))\\), not torch"), d.producer());
        assertEquals(ReferenceDump.open(Project.dump("mini-k3-93")).manifestSha256(), d.inputsFromSha256(), "its inputs are the torch reference's");
        Verdict v = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, List.of(k3j.verdict.Invariants.Item.pass("L0"))).against(d.producer(), d.promptId());
        assertTrue(v.line().endsWith("(" + d.producer() + ")"), v.line());
        assertEquals(d.producer(), v.json().get("reference"));
        ReferenceDump torch = ReferenceDump.open(Project.dump("mini-k3-93"));
        Verdict t = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, List.of(k3j.verdict.Invariants.Item.pass("L0"))).against(torch.producer(), torch.promptId());
        assertEquals("VERDICT: CONFORMS", t.line(), "a torch reference leaves the line as it was");
        assertTrue(((String) t.json().get("reference")).startsWith("reference: torch "), "the JSON names torch: " + t.json());
    }

    @Test
    void aK3jReferenceClaimingTorchIsRefused() throws IOException {
        Evidence.caseName("k3j reference: a claim of torch, or no producer, is refused");
        Path work = Files.createTempDirectory("k3j-ref-claims");
        try {
            Path claims = Tamper.copy(resident, work.resolve("claims-torch"));
            Tamper.manifest(claims, m -> m.with("producer").put("name", "torch"));
            ConformException e = assertThrows(ConformException.class, () -> ReferenceDump.open(claims));
            assertTrue(e.getMessage().contains("producer claims 'torch'"), e.getMessage());
            Path anonymous = Tamper.copy(resident, work.resolve("anonymous"));
            Tamper.manifest(anonymous, m -> m.remove("producer"));
            e = assertThrows(ConformException.class, () -> ReferenceDump.open(anonymous));
            assertTrue(e.getMessage().contains("names no producer"), e.getMessage());
        } finally {
            Project.deleteTree(work);
        }
    }

    @Test
    void aWrongK3jReferenceFailsTheCleanPort() throws IOException {
        Evidence.caseName("k3j reference: a wrong one (L3 attn_out 1% off) fails the clean float32 port");
        Path work = Files.createTempDirectory("k3j-ref-wrong");
        try {
            Path wrong = Tamper.copy(resident, work.resolve("wrong"));
            Tamper.scale(wrong, "layers.3.attn_out", 1.01f);
            Path clean = Project.existing(TorchPorts.folder().resolve("float32"));
            JudgedCandidate torch = JudgedCandidate.of(clean, Project.dump("mini-k3-93")).headline(), bad = JudgedCandidate.of(clean, wrong).headline();
            Evidence.parameter("against the wrong k3j reference", bad.toString());
            assertFalse(bad.green(), "the clean port fails against a wrong reference: " + bad);
            assertEquals(3, bad.firstLayer(), "first at the wrong layer: " + bad);
            assertEquals("attn_out", bad.firstStage(), "first at the wrong stage: " + bad);
            assertNotEquals(torch, bad, "the gate's equality fails for a wrong k3j reference");
        } finally {
            Project.deleteTree(work);
        }
    }
}
