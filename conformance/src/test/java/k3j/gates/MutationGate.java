package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import k3j.bisect.Bisect;
import k3j.bisect.Candidate;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.bisect.LayerConformance;
import k3j.bisect.LayerRunner;
import k3j.bisect.FaultStage;
import k3j.cache.ExpertPart;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.harness.Caught;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.kernels.Workers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: per-layer conformance catches a corrupted checkpoint at exactly the corrupted layer, and
 * {@code k3 bisect} names the corruption whenever it is one of the kinds bisect tries (a same-shape swap, a
 * stored transpose, an expert's nibble order) and says "nothing explains it" — still naming layer and stage
 * — when it is not (a filled A_log, a scaled norm). One case per row of {@link #TABLE}: Corruptions writes
 * the corrupted copy of mini-k3-93 into a temp dir (untouched shards hard-linked, headers unchanged), every
 * one of the 93 layers runs alone from the mini dump's inputs, and bisect diagnoses the first failing one.
 *
 * <p>The reference is passed explicitly: the corrupted copy's shard headers hash exactly as the original's
 * (a corruption changes data only), so a header-hash matcher would accept the dump for it too — which is
 * what a user needs: a dump identifies the checkpoint it was made from by headers, and the data difference
 * is what the comparison is there to find. Metric per case: the failing layer's worst stage ratio to budget.
 *
 * <p>Row 8 is the control: A_log's padding tail (entries H.. of the zero-padded tensor, docs/semantics.md §3.11) is
 * never read by a per-head engine, so NO layer may fail (a per-channel engine fails that row).
 */
@Tag("mutation")
@Epic("mutation")
class MutationGate {
    /** One corruption, the first (and only) layer that must fail, its first failing stage, bisect's verdict (null: unexplained). */
    record Mutation(String name, List<Corruption> corruptions, int failingLayer, FaultStage stage, Candidate verdict) {
        Mutation(String name, Corruption corruption, int failingLayer, FaultStage stage, Candidate verdict) {
            this(name, List.of(corruption), failingLayer, stage, verdict);
        }

        String spec() {
            return String.join(" + ", corruptions.stream().map(Corruption::spec).toList());
        }

        @Override
        public String toString() {
            return name;
        }
    }

    static final int NONE = -1;
    static final List<ExpertPart> PACKED = List.of(ExpertPart.W1_PACKED, ExpertPart.W2_PACKED, ExpertPart.W3_PACKED);

    /** The corruption table. mini-k3-93 layer map: MLA at 3, 7, 11, ... 91 and 92; layer 0 is the dense MLP. */
    static final List<Mutation> TABLE = List.of(
            new Mutation("KDA L37 q_proj <-> k_proj", new Corruption.Swap(37, "self_attn.q_proj.weight", "self_attn.k_proj.weight"),
                    37, FaultStage.ATTN_OUT, new Candidate.Swap("self_attn.k_proj.weight", "self_attn.q_proj.weight")),
            new Mutation("layer 0 dense gate_proj <-> up_proj", new Corruption.Swap(0, "mlp.gate_proj.weight", "mlp.up_proj.weight"),
                    0, FaultStage.MLP_OUT, new Candidate.Swap("mlp.gate_proj.weight", "mlp.up_proj.weight")),
            new Mutation("last layer (MLA L92) input_layernorm <-> post_attention_layernorm",
                    new Corruption.Swap(92, "input_layernorm.weight", "post_attention_layernorm.weight"),
                    92, FaultStage.ATTN_NORM, new Candidate.Swap("input_layernorm.weight", "post_attention_layernorm.weight")),
            new Mutation("MLA L47 shared expert gate_proj <-> up_proj",
                    new Corruption.Swap(47, "block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight"),
                    47, FaultStage.MLP_OUT, new Candidate.Swap("block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight")),
            new Mutation("KDA L38 expert 6 nibbles flipped", new Corruption.NibbleFlip(38, 6),
                    38, FaultStage.MLP_OUT, new Candidate.NibbleFlip(6, PACKED)),
            new Mutation("MLA L91 expert 1 nibbles flipped", new Corruption.NibbleFlip(91, 1),
                    91, FaultStage.MLP_OUT, new Candidate.NibbleFlip(1, PACKED)),
            new Mutation("MLA L11 expert 4 w1 <-> w3 (packed and scales)", List.of(
                    new Corruption.Swap(11, "block_sparse_moe.experts.4.w1.weight_packed", "block_sparse_moe.experts.4.w3.weight_packed"),
                    new Corruption.Swap(11, "block_sparse_moe.experts.4.w1.weight_scale", "block_sparse_moe.experts.4.w3.weight_scale")),
                    11, FaultStage.MLP_OUT, new Candidate.GateUpSwap(4)),
            new Mutation("KDA L5 o_proj stored transposed", new Corruption.Transpose(5, "self_attn.o_proj.weight"),
                    5, FaultStage.ATTN_OUT, new Candidate.Transpose("self_attn.o_proj.weight")),
            new Mutation("KDA L13 A_log padding tail filled (control: never read)", new Corruption.Fill(13, "self_attn.A_log", 5, 3.0f),
                    NONE, null, null),
            new Mutation("KDA L14 A_log tail from head 3 filled", new Corruption.Fill(14, "self_attn.A_log", 3, 2.0f),
                    14, FaultStage.ATTN_OUT, null),
            new Mutation("KDA L60 post_attention_layernorm x1.5", new Corruption.Scale(60, "post_attention_layernorm.weight", 1.5f),
                    60, FaultStage.MLP_NORM, null),
            new Mutation("MLA L3 kv_a_layernorm x2", new Corruption.Scale(3, "self_attn.kv_a_layernorm.weight", 2.0f),
                    3, FaultStage.ATTN_OUT, null));

    /** The report's row for a planted mutation: the first failing layer, its first failing stage, finding and ratio. */
    static Caught caught(Mutation m, Bisect.Report report) {
        if (report.failing().isEmpty()) return Caught.missed("binding mutant", m.name());
        LayerReport r = report.layers().get(report.failing().getFirst());
        Bisect.Diagnosis d = report.diagnosis();
        return new Caught("binding mutant", m.name(), r.layer(), d != null ? d.stage().key : r.firstDivergence(), r.finding().tag(),
                d != null ? d.ratio() : r.worstRatioToBudget());
    }

    static Path mini, dump, scratch;
    static Workers workers;

    @BeforeAll
    static void open() throws IOException {
        mini = Project.fixture("mini-k3-93");
        dump = Project.dump("mini-k3-93");
        scratch = Files.createTempDirectory("k3j-mutation-");
        workers = Workers.of(2);
    }

    @AfterAll
    static void close() throws IOException {
        if (workers != null) workers.close();
        Project.deleteTree(scratch);
    }

    static Stream<Mutation> table() {
        if (TABLE.isEmpty()) fail("the mutation table is empty");
        return TABLE.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("table")
    void conformanceFailsExactlyTheCorruptedLayerAndBisectNamesIt(Mutation m) {
        Path copy = scratch.resolve("case-" + TABLE.indexOf(m));
        long t0 = System.nanoTime();
        Corruptions.write(mini, copy, m.corruptions());
        Bisect.Report report;
        // the explicit reference is still matched by shard names, sizes, header sha256 and config: a data-only corruption passes
        try (Conformance c = Conformance.open(copy, dump, List.of(), workers); LayerRunner runner = new LayerRunner(c.model(), workers)) {
            report = Bisect.run(new LayerConformance(c), runner, IntStream.range(0, c.layerCount()).boxed().toList());
        }
        double seconds = (System.nanoTime() - t0) / 1e9;

        Evidence.parameter("corruption", m.spec());
        Evidence.parameter("expected failing layer", m.failingLayer() == NONE ? "none" : m.failingLayer() + " " + m.stage().key);
        Evidence.parameter("expected verdict", m.verdict() == null ? (m.failingLayer() == NONE ? "-" : "unexplained") : m.verdict().describe());
        Evidence.parameter("failing layers", report.failing().toString());
        Evidence.parameter("verdict", report.summary());
        Evidence.parameter("wall s", String.format(java.util.Locale.ROOT, "%.2f", seconds));
        if (report.diagnosis() != null) {
            Evidence.parameter("candidates re-run", report.diagnosis().tried());
            Evidence.parameter("diagnosis ms", String.format(java.util.Locale.ROOT, "%.0f", report.diagnosis().nanos() / 1e6));
        }
        Map<String, Object> evidence = new LinkedHashMap<>();
        for (LayerReport r : report.layers()) if (!r.conforms() || r.layer() == m.failingLayer()) evidence.put(r.name(), r.ratios());
        Evidence.json("failing layer ratios to budget", evidence);
        Evidence.text("bisect summary", report.summary());
        if (m.failingLayer() != NONE) caught(m, report).attach();

        if (m.failingLayer() == NONE) {
            Evidence.parameter("worst ratio to budget", report.layers().stream().mapToDouble(LayerReport::worstRatioToBudget).max().orElse(Double.POSITIVE_INFINITY));
            assertEquals(List.of(), report.failing(), m.spec() + " must be invisible, yet layers fail: " + report.summary());
            assertNull(report.diagnosis());
            return;
        }
        Evidence.parameter("worst ratio to budget", report.layers().get(m.failingLayer()).worstRatioToBudget());
        assertEquals(List.of(m.failingLayer()), report.failing(), "exactly the corrupted layer must fail (every other layer runs from the reference's inputs): " + report.summary());
        Bisect.Diagnosis d = report.diagnosis();
        assertNotNull(d, "a failing layer that ran must be diagnosed");
        assertTrue(report.layers().get(m.failingLayer()).message().startsWith("[binding error]"), "a corruption misses by thousands of budgets: " + report.layers().get(m.failingLayer()).message());
        assertEquals(m.stage(), d.stage(), "first failing stage of L" + m.failingLayer());
        assertTrue(report.summary().startsWith("L" + m.failingLayer() + " "), "the summary names the layer: " + report.summary());
        assertTrue(d.summary().contains(" " + m.stage().key + " "), "the summary names the stage: " + d.summary());
        if (m.verdict() == null) {
            assertEquals(List.of(), d.explanations().stream().map(e -> e.candidate().describe()).toList(),
                    m.spec() + " is none of bisect's kinds: nothing may explain it");
            assertTrue(d.summary().contains("nothing explains it"), d.summary());
        } else {
            assertEquals(List.of(m.verdict()), d.explanations().stream().map(Bisect.Explanation::candidate).toList(),
                    "bisect must name exactly the corruption: " + d.summary());
            assertTrue(d.explanations().getFirst().layerPasses(), "with the corruption undone the whole layer conforms: " + d.summary());
        }
    }
}
