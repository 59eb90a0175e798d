package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.model.Attachment;
import io.qameta.allure.model.Label;
import io.qameta.allure.model.Status;
import io.qameta.allure.model.StatusDetails;
import io.qameta.allure.model.TestResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.verdict.PlanVerdict;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The first screen's fields as the verdict file holds them: decided from the cases, never by the report. */
class RunStoryTest {
    @TempDir
    Path results;

    private final List<String> planned = new ArrayList<>();
    private final Map<String, Boolean> judged = new LinkedHashMap<>();

    private TestResult result(String part, String name, Status status, String message) {
        TestResult t = new TestResult().setUuid(java.util.UUID.randomUUID().toString()).setName(name).setStatus(status);
        t.getLabels().add(new Label().setName(ReportPart.LABEL).setValue(part));
        if (message != null) t.setStatusDetails(new StatusDetails().setMessage(message));
        return t;
    }

    /** A layer case with its stage metrics attachment, as LayerConformanceGate writes them. */
    private void layer(RunStory s, int l, boolean conforms, String finding, double ratio) throws IOException {
        TestResult t = result(ReportPart.LAYERS.title, Evidence.layer(l) + " MLA", conforms ? Status.PASSED : Status.FAILED, conforms ? null : "[x] L" + l + " does not conform");
        Path a = results.resolve(t.getUuid() + "-attachment.json");
        Files.writeString(a, "{\"finding\":\"" + finding + "\",\"first_over_budget\":" + (conforms ? "null" : "\"attn_out\"") + ",\"worst_ratio_to_budget\":" + ratio
                + ",\"diagnosis\":" + (conforms ? "null" : "\"L" + l + ": k_proj and q_proj are swapped\"") + ",\"stages\":[{\"stage\":\"attn_out\",\"ratio_to_budget\":" + ratio + "}]}");
        t.getAttachments().add(new Attachment().setName("stage metrics").setSource(a.getFileName().toString()));
        add(s, t, "L" + l);
    }

    private void add(RunStory s, TestResult t, String item) {
        if (item != null) {
            planned.add(item);
            if (t.getStatus() != Status.SKIPPED) judged.put(item, t.getStatus() == Status.PASSED);
        }
        s.add(t, item, results);
    }

    private Map<String, Object> fields(RunStory s) {
        return s.fields(PlanVerdict.decide(planned, judged, true, true), planned);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object o) {
        return (Map<String, Object>) o;
    }

    @Test
    void theLayersCountCountsLayersNotTheOverview() throws IOException {
        RunStory s = new RunStory();
        for (int l = 0; l < 93; l++) layer(s, l, l != 12 && l != 5, l == 5 || l == 12 ? "BINDING_ERROR" : "CONFORMS", l == 5 || l == 12 ? 3.97e4 : 0.2);
        add(s, result(ReportPart.LAYERS.title, "overview: layers 0-92 x stages", Status.FAILED, "[binding error] 2 of 93 layers do not conform"), null);
        Map<String, Object> f = fields(s);
        Map<String, Object> layers = map(map(f.get("counts")).get("layers"));
        assertEquals(93, layers.get("total"));
        assertEquals(2L, layers.get("failed"));
        assertEquals(93, map(f.get("layers")).size());
        assertEquals("DOES NOT CONFORM", f.get("headline"));
    }

    @Test
    void theFirstDivergenceIsAFailingModelCheckElseTheLowestFailingLayer() throws IOException {
        RunStory s = new RunStory();
        layer(s, 12, false, "BINDING_ERROR", 100);
        layer(s, 5, false, "WRONG_FORMULA", 41);
        layer(s, 3, true, "CONFORMS", 0.5);
        Map<String, Object> d = map(fields(s).get("first_divergence"));
        assertEquals("L5 MLA", d.get("where"));
        assertEquals("attn_out", d.get("stage"));
        assertEquals("[wrong constant or formula]", d.get("category"));
        assertEquals("41.0", d.get("ratio_to_budget"));
        assertEquals("L5: k_proj and q_proj are swapped", fields(s).get("bisect"));
        add(s, result(ReportPart.MODEL.title, RunPlan.MODEL_MATCH, Status.FAILED, "[missing tensor] no such tensor"), RunPlan.MODEL_MATCH);
        assertEquals(RunPlan.MODEL_MATCH, map(fields(s).get("first_divergence")).get("where"));
        assertEquals("[missing tensor]", map(fields(s).get("first_divergence")).get("category"));
    }

    @Test
    void aCandidatesBisectLineSaysItDoesNotApplyAndHowToConfirmABinding() throws IOException {
        RunStory s = new RunStory();
        s.identity("k3ref (reference-dumps/torch), mutant x (float32)", "/tmp/cand", "reference-dumps/mini-k3-93", "abc", true);
        layer(s, 3, false, "WRONG_FORMULA", 41);
        String bisect = (String) fields(s).get("bisect");
        assertTrue(bisect.startsWith("does not apply to a candidate dump"), bisect);
        assertTrue(bisect.contains("k3 corrupt") && bisect.contains("--against"), bisect);
        assertTrue(!bisect.contains("k_proj and q_proj are swapped"), "no bisect finding on a candidate: " + bisect);
    }

    @Test
    void aPlantWhoseCaseFailsIsNotCaught() throws IOException {
        RunStory s = new RunStory();
        for (boolean passes : new boolean[] {true, false}) {
            TestResult t = result(ReportPart.GATES.title, "plant " + passes, passes ? Status.PASSED : Status.FAILED, null);
            t.setFullName("k3j.gates.MutationGate.plant");
            Path a = results.resolve(t.getUuid() + "-caught.json");
            Files.writeString(a, "{\"kind\":\"binding mutant\",\"planted\":\"p" + passes + "\",\"category\":\"[binding error]\",\"ratio_to_budget\":120.5}");
            t.getAttachments().add(new Attachment().setName(Caught.ATTACHMENT).setSource(a.getFileName().toString()));
            add(s, t, null);
        }
        Map<String, Object> f = fields(s);
        assertEquals(1L, f.get("catches_caught"));
        List<?> rows = (List<?>) f.get("catches");
        // in the order of what was planted: "pfalse" (its case failed) before "ptrue"
        assertEquals(List.of(false, true), rows.stream().map(r -> map(r).get("caught")).toList());
        assertEquals("121x", map(rows.getFirst()).get("ratio_to_budget"));
    }
}
