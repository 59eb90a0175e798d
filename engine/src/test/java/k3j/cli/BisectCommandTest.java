package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import k3j.Repo;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code k3 bisect}: exit 0 when the layers conform, 1 naming and diagnosing every failing layer in one run, 1 for a
 * dump of other weights, 2 for bad usage; the dump found as {@code k3 conform} finds it.
 */
class BisectCommandTest {
    @TempDir
    Path tmp;

    @Test
    void conformingLayersExitZero() {
        CliRun r = k3("bisect", Repo.path("oracle-fixtures/mini-k3-93").toString(), "--reference", Repo.path("reference-dumps/mini-k3-93").toString(), "--layers", "0-3", "--threads", "1");
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.out().contains("BISECT: all 4 layers conform") && r.out().contains("VERDICT: CONFORMS"), r.out());
    }

    @Test
    void aSwappedPairIsNamedWithItsLayerAndStage() {
        Path copy = tmp.resolve("m");
        Corruptions.write(Repo.path("oracle-fixtures/mini-k3-93"), copy, List.of(new Corruption.Swap(37, "self_attn.q_proj.weight", "self_attn.k_proj.weight")));
        CliRun r = k3("bisect", copy.toString(), "--reference", Repo.path("reference-dumps/mini-k3-93").toString(), "--layers", "36-38", "--threads", "1");
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("  L37: k_proj and q_proj are swapped"), r.out());
        assertTrue(r.out().contains("BISECT: L37 KDA attn_out") && r.out().contains("VERDICT: DOES NOT CONFORM"), r.out());
        assertTrue(r.out().contains("2 of 3 layers conform"), r.out());
    }

    /**
     * Under a capped plan (trunk streamed through a small ring, an expert cache of a few slots) bisect names what it
     * names resident: a tensor swap (the candidate layer bound afresh beside the streamed one) and an expert's
     * nibble order (the candidate rewriting what the cache serves). The tensor swap binds the layer again from the
     * trunk slot's bytes, and the plan counts a candidate's scratch.
     */
    @Test
    void underACappedPlanTheSameCandidatesAreNamed() {
        Path copy = tmp.resolve("m"), trunk = tmp.resolve("trunk");
        Corruptions.write(Repo.path("oracle-fixtures/mini-k3-93"), copy, List.of(new Corruption.Swap(37, "self_attn.q_proj.weight", "self_attn.k_proj.weight"),
                new Corruption.NibbleFlip(38, 6)));
        assertEquals(0, k3("pack-trunk", copy.toString(), trunk.toString()).exit());
        String[] capped = {"--trunk", trunk.toString(), "--trunk-gb", "0.001", "--cache-gb", "0.0001", "--threads", "1", "--reference",
                Repo.path("reference-dumps/mini-k3-93").toString()};
        CliRun r = k3(concat(new String[] {"bisect", copy.toString(), "--layers", "36-38"}, capped));
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("trunk (STREAMED)") && r.out().contains("served by a") && r.out().contains("bisect scratch"), r.out());
        assertTrue(r.out().contains("  L37: k_proj and q_proj are swapped"), r.out());
        CliRun e = k3(concat(new String[] {"bisect", copy.toString(), "--layers", "38"}, capped));
        assertEquals(1, e.exit(), e.out() + e.err());
        assertTrue(e.out().contains("L38: expert 6's nibble order is flipped"), e.out());
    }

    /** Without --reference, the dump whose manifest matches the model is found (as conform finds it). */
    @Test
    void theDumpIsFoundAsConformFindsIt() {
        CliRun r = k3("bisect", Repo.path("oracle-fixtures/mini-k3-93").toString(), "--layers", "0-1", "--threads", "1");
        assertEquals(0, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("reference-dumps/mini-k3-93") && r.out().contains("BISECT: all 2 layers conform"), r.out());
    }

    /**
     * Two corrupted layers: both are diagnosed in one run, in layer order, each with its evidence, family order, what
     * was tried and what explains it; the --json holds the same per layer.
     */
    @Test
    void everyFailingLayerIsDiagnosedInOneRun() throws Exception {
        Path copy = tmp.resolve("m"), json = tmp.resolve("b.json");
        Corruptions.write(Repo.path("oracle-fixtures/mini-k3-93"), copy, List.of(new Corruption.Swap(20, "self_attn.v_proj.weight", "self_attn.g_proj.weight"),
                new Corruption.Swap(40, "block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight")));
        CliRun r = k3("bisect", copy.toString(), "--layers", "19-41", "--threads", "1", "--budget", "60", "--json", json.toString());
        assertEquals(1, r.exit(), r.out() + r.err());
        String o = r.out();
        assertTrue(o.contains("  L20: g_proj and v_proj are swapped"), o);
        assertTrue(o.contains("  L40: shared_experts.gate_proj and shared_experts.up_proj are swapped"), o);
        assertTrue(o.indexOf("diagnosis of L20") < o.indexOf("diagnosis of L40"), o);
        assertTrue(o.contains("budget 30 candidates of 60 candidates"), "the first of two layers gets half the budget:\n" + o);
        assertTrue(o.contains("family order: same-shape swaps, stored transposes"), o);
        assertTrue(o.contains("[2 of 23 layers fail: [20, 40]; cause [binding error] x2]"), o);
        var tree = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile());
        assertEquals(2, tree.path("diagnoses").size(), tree.toPrettyString());
        assertEquals(40, tree.path("diagnoses").get(1).path("layer").asInt());
        assertTrue(tree.path("diagnoses").get(1).path("explained").asBoolean(), tree.toPrettyString());
        assertTrue(tree.path("diagnoses").get(1).path("evidence").path("failing_experts").isArray(), "the MoE layer's routed experts were swept: " + tree.toPrettyString());
    }

    private static String[] concat(String[] a, String[] b) {
        String[] c = java.util.Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    @Test
    void aDumpOfOtherWeightsIsRefusedAndBadUsageIsTwo() {
        CliRun r = k3("bisect", Repo.path("oracle-fixtures/mini-k3-93").toString(), "--reference", Repo.path("reference-dumps/tiny-k3").toString());
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("[reference mismatch]") || r.err().contains("other weights"), r.err());
        assertEquals(2, k3("bisect", Repo.path("oracle-fixtures/mini-k3-93").toString(), "--reference", Repo.path("reference-dumps/mini-k3-93").toString(), "--layers", "90-99").exit());
        assertEquals(2, k3("bisect", tmp.resolve("none").toString(), "--reference", Repo.path("reference-dumps/mini-k3-93").toString()).exit());
    }
}
