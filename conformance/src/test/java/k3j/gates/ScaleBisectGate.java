package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Epic;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;
import k3j.bisect.Candidate;
import k3j.bisect.Corruption;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ScaleCopies;
import k3j.harness.ScaleFixture;
import k3j.plan.Human;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: at the released model's widths, {@code k3 bisect} with its defaults (the dump found as conform finds it, the
 * default budget) names every corrupted layer of a copy of the scale fixture in one run, each by the mix-up a porter
 * made, and peaks within the memory plan it prints (plus the JVM overhead the manifest states) under the capped plan:
 * the trunk packed from the copy and streamed through one ring slot, the routed experts through a cache of a few slots.
 *
 * <p>The cases are what a converter gets wrong at these widths, one per family of tensor: two KDA projections of one
 * shape swapped (v_proj and g_proj, [12288, 7168]), the two shared-expert projections of a MoE layer swapped (the
 * dense swap among 28,000 expert candidates: [6144, 7168]), an MLA LoRA projection stored transposed (q_a_proj,
 * [1536, 7168], its bytes the row-major [7168, 1536]). One copy corrupts three layers at once (one packed trunk, one
 * run), so the run also shows that every failing layer is diagnosed under one shared budget. Data: the fixture ({@link ScaleFixture#underTest()}),
 * its dump {@code reference-dumps/scale-k3}, the capped plan and overhead in
 * {@code oracle-fixtures/scale-k3/manifest.json} ({@code bounded_memory}); the copy from {@link ScaleCopies} (shared with
 * K3jReferenceScaleGate), its trunk under {@code build/}, deleted after the case.
 */
@Tag("scale")
@Epic("scale: the released widths")
class ScaleBisectGate {
    /** A corrupted copy: its corruptions (each one of bisect's kinds) and the layers bisect checks. */
    record Case(String name, List<Corruption> corruptions, String layers) {
        @Override
        public String toString() {
            return name;
        }
    }

    static final List<Case> CASES = List.of(
            new Case("L1 KDA v_proj <-> g_proj, L2 KDA shared-expert gate_proj <-> up_proj, L3 MLA q_a_proj (LoRA) stored transposed", List.of(
                    new Corruption.Swap(1, "self_attn.v_proj.weight", "self_attn.g_proj.weight"),
                    new Corruption.Swap(2, "block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight"),
                    new Corruption.Transpose(3, "self_attn.q_a_proj.weight")), "0-3"));

    static Path model, work;
    static JsonNode bounds;

    @BeforeAll
    static void prepare() throws Exception {
        model = ScaleFixture.underTest().dir();
        bounds = Project.json(Project.fixture("scale-k3/manifest.json")).path("bounded_memory");
        if (bounds.isMissingNode()) throw new AssertionError("gate data missing: oracle-fixtures/scale-k3/manifest.json has no bounded_memory section");
        work = Files.createDirectories(Project.root().resolve("build/scale-work"));
    }

    static Stream<Case> cases() {
        return CASES.stream();
    }

    /** What bisect must print for a corruption: the candidate that undoes it. */
    static Candidate verdict(Corruption c) {
        return switch (c) {
            case Corruption.Swap s -> new Candidate.Swap(s.a().compareTo(s.b()) < 0 ? s.a() : s.b(), s.a().compareTo(s.b()) < 0 ? s.b() : s.a());
            case Corruption.Transpose t -> new Candidate.Transpose(t.tensor());
            default -> throw new IllegalArgumentException(c.spec() + " is not one of this gate's kinds");
        };
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void bisectNamesEveryCorruptedLayerWithinTheDefaultBudgetAndItsPlan(Case c) throws Exception {
        Path trunk = work.resolve("bisect-trunk"), json = work.resolve("bisect.json");
        Project.deleteTree(Files.exists(trunk) ? trunk : null);
        Files.deleteIfExists(json);
        Path copy = ScaleCopies.of(model, "three-layers", c.corruptions());   // shared with K3jReferenceScaleGate, which judges the same copy
        try {
            long t0 = System.nanoTime();
            ChildJvm.Result pack = ChildJvm.run(Map.of(), 1800, "k3j.cli.K3", "pack-trunk", copy.toString(), trunk.toString());
            double packSecs = (System.nanoTime() - t0) / 1e9;
            assertEquals(0, pack.exit(), "k3 pack-trunk of the copy:\n" + pack.output());
            List<String> args = new ArrayList<>(List.of("bisect", copy.toString(), "--layers", c.layers(), "--threads", "2", "--json", json.toString(),
                    "--trunk", trunk.toString(), "--preset", bounds.path("preset").asText(), "--trunk-gb", bounds.path("trunk_gb").asText(),
                    "--trunk-ring", bounds.path("trunk_ring").asText(), "--cache-gb", bounds.path("cache_gb").asText()));
            t0 = System.nanoTime();
            ChildJvm.Result r = ChildJvm.run(Map.of(), 3600, "k3j.cli.K3", args.toArray(String[]::new));
            double secs = (System.nanoTime() - t0) / 1e9;
            System.out.println("== k3 bisect (" + c.name() + "), " + String.format(Locale.ROOT, "%.1f s (pack-trunk %.1f s)", secs, packSecs) + "\n" + r.output());
            Evidence.text("k3 bisect", r.output());
            Evidence.parameter("bisect wall", String.format(Locale.ROOT, "%.1f s", secs));
            Evidence.parameter("pack-trunk wall", String.format(Locale.ROOT, "%.1f s", packSecs));
            assertEquals(1, r.exit(), "bisect must fail the corrupted layers:\n" + r.output());
            assertTrue(Files.exists(json), "bisect wrote no --json:\n" + r.output());
            JsonNode out = Project.json(json);
            Evidence.json("bisect diagnoses", out);
            Map<Integer, JsonNode> byLayer = new LinkedHashMap<>();
            for (JsonNode d : out.path("diagnoses")) byLayer.put(d.path("layer").asInt(), d);
            for (Corruption k : c.corruptions()) {
                String want = "L" + k.layer() + ": " + verdict(k).describe();
                JsonNode d = byLayer.get(k.layer());
                assertTrue(d != null, "L" + k.layer() + " was not diagnosed:\n" + r.output());
                Evidence.parameter("L" + k.layer(), String.format(Locale.ROOT, "%s; %d tried (%s) in %.1f s; family order %s", verdict(k).describe(),
                        d.path("tried").asInt(), d.path("tried_by_family").asText(), d.path("seconds").asDouble(), d.path("evidence").path("family_order")));
                assertTrue(r.output().contains("  " + want), "bisect must name " + want + " within the default budget:\n" + r.output());
            }
            assertEquals(c.corruptions().stream().map(Corruption::layer).distinct().sorted().toList(), toInts(out.path("failing_layers")),
                    "exactly the corrupted layers fail:\n" + r.output());
            long peak = out.path("peak_rss_bytes").asLong(-1), total = out.path("plan_total_bytes").asLong(-1), overhead = bounds.path("overhead_bytes").asLong();
            assertTrue(peak > 0 && total > 0, "no peak RSS or plan in the --json:\n" + r.output());
            Evidence.parameter("peak RSS / plan TOTAL", Human.bytes(peak) + " / " + Human.bytes(total) + " (bisect scratch "
                    + Human.bytes(out.path("plan_bisect_scratch_bytes").asLong()) + ")");
            assertTrue(peak <= total + overhead, "bisect peaked at " + Human.bytes(peak) + ", over its plan TOTAL " + Human.bytes(total)
                    + " + the stated overhead " + Human.bytes(overhead) + ":\n" + r.output());
        } finally {
            Project.deleteTree(Files.exists(trunk) ? trunk : null);
            Files.deleteIfExists(json);
        }
    }

    private static List<Integer> toInts(JsonNode a) {
        List<Integer> out = new ArrayList<>();
        a.forEach(n -> out.add(n.asInt()));
        return out;
    }
}
