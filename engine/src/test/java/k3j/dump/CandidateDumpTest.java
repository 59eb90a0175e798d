package k3j.dump;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import k3j.Repo;
import k3j.capture.CandidateWriter;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LogitParity;
import k3j.kernels.Workers;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Candidate dumps on the 93-layer oracle: k3j's own candidate is judged exactly like the direct run (same
 * verdicts, same ratios, same logit figures), a missing stage or an unrunnable layer is a missing stage at that
 * layer, and a candidate made from another reference is refused.
 */
class CandidateDumpTest {
    static final Path MINI = Repo.path("oracle-fixtures/mini-k3-93"), DUMPS = Repo.path("reference-dumps");
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    static Path tmp;
    static Workers workers;
    static Conformance direct;
    static Path own;

    @BeforeAll
    static void writeK3jsCandidate() throws IOException {
        workers = Workers.of(2);
        direct = Conformance.open(MINI, null, List.of(DUMPS), workers);
        own = tmp.resolve("k3j");
        assertEquals(93, CandidateWriter.write(direct, own, "k3j test"));
    }

    @AfterAll
    static void close() {
        direct.close();
        workers.close();
    }

    @Test
    void k3jsCandidateGivesTheDirectRunsVerdictsExactly() {
        try (Conformance cand = Conformance.candidate(own, null, List.of(DUMPS))) {
            assertEquals(direct.dump().source().toAbsolutePath().normalize(), cand.dump().source().toAbsolutePath().normalize(), "the reference the candidate names");
            for (int i = 0; i < direct.layerCount(); i++) {
                LayerReport a = direct.layer(i), b = cand.layer(i);
                assertEquals(a.finding(), b.finding(), "L" + i);
                assertEquals(a.ratios(), b.ratios(), "L" + i + " ratios to budget, bit for bit");
                assertEquals(a.routing(), b.routing(), "L" + i);
                assertEquals(a.message(), b.message(), "L" + i);
            }
            for (boolean incremental : new boolean[] {false, true}) {
                LogitParity.Result a = direct.teacherForcing(incremental), b = cand.teacherForcing(incremental);
                assertEquals(a, b, incremental ? "incremental" : "full recompute");
            }
            assertArrayEquals(direct.greedy().engine(), cand.greedy().engine());
        }
    }

    @Test
    void aMissingStageIsAMissingStageAtThatLayer() throws IOException {
        Path c = copy(own, tmp.resolve("missing"));
        ObjectNode m = (ObjectNode) JSON.readTree(c.resolve("manifest.json").toFile());
        ((ObjectNode) m.get("arrays")).remove("layers.40.mlp_norm");
        ((ObjectNode) m.get("arrays")).remove("layers.41.moe_idx");
        JSON.writeValue(c.resolve("manifest.json").toFile(), m);
        try (Conformance cand = Conformance.candidate(c, null, List.of(DUMPS))) {
            LayerReport r40 = cand.layer(40), r41 = cand.layer(41);
            assertEquals(Finding.MISSING_STAGE, r40.finding(), r40.message());
            assertEquals("mlp_norm", r40.firstDivergence());
            assertTrue(r40.message().startsWith("[missing stage] L40 KDA: not in the candidate: mlp_norm"), r40.message());
            assertEquals(Finding.MISSING_STAGE, r41.finding(), r41.message());
            assertEquals("moe_idx", r41.firstDivergence());
            assertEquals(Finding.CONFORMS, cand.layer(39).finding());
        }
    }

    @Test
    void aLayerTheEngineCouldNotRunIsMissing() throws IOException {
        Path c = copy(own, tmp.resolve("error"));
        ObjectNode m = (ObjectNode) JSON.readTree(c.resolve("manifest.json").toFile());
        ((ObjectNode) m.get("layers").get(7)).put("error", "missing tensor language_model.model.layers.7.self_attn.q_proj.weight");
        JSON.writeValue(c.resolve("manifest.json").toFile(), m);
        try (Conformance cand = Conformance.candidate(c, null, List.of(DUMPS))) {
            LayerReport r = cand.layer(7);
            assertEquals(Finding.MISSING_STAGE, r.finding());
            assertTrue(r.message().contains("the engine could not run the layer (missing tensor"), r.message());
        }
    }

    @Test
    void aCandidateFromAnotherReferenceIsRefused() {
        ConformException e = assertThrows(ConformException.class, () -> Conformance.candidate(own, DUMPS.resolve("tiny-k3"), List.of()));
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().contains("was made from the reference with manifest sha256"), e.getMessage());
    }

    static Path copy(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(from)) {
            for (Path p : s.toList()) Files.copy(p, to.resolve(p.getFileName()));
        }
        return to;
    }
}
