package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.PlanVerdict;
import org.junit.jupiter.api.Test;

/**
 * The run's verdict file judges each plan item as its gate judged it (docs/report.md, "Plan and verdict"), not by its
 * case's status alone: a layer whose stage the candidate does not hold fails its case, yet the run is INCOMPLETE, as
 * {@code k3 conform} says; a candidate refused on opening is REFUSED.
 */
class RunPlanItemsTest {
    static final List<String> PLAN = List.of(RunPlan.CHECKPOINT_OPENED, "L44", "L45");

    static String outcome(Invariants.Item l45) {
        Map<String, Invariants.Item> judged = new LinkedHashMap<>();
        judged.put(RunPlan.CHECKPOINT_OPENED, Invariants.Item.pass(RunPlan.CHECKPOINT_OPENED));
        judged.put("L44", RunPlan.judged("L44", Invariants.Item.pass("L44"), true));
        judged.put("L45", l45);
        return PlanVerdict.of(PLAN, judged, true, true).outcome();
    }

    @Test
    void aMissingStageIsNotJudgedThoughItsCaseFailed() {
        Invariants.Item missing = Invariants.Item.notJudged("L45", "[missing stage] layers.45.mlp_out");
        assertEquals("INCOMPLETE", outcome(RunPlan.judged("L45", missing, false)));
        // the rule of a run that read its cases' statuses alone: a failure, what the CLI never says here
        assertEquals("DOES_NOT_CONFORM", outcome(RunPlan.judged("L45", null, false)));
    }

    @Test
    void aCaseThatFailedAfterItsGateRecordedAPassFailed() {
        assertEquals(Invariants.Status.FAIL, RunPlan.judged("L45", Invariants.Item.pass("L45"), false).status());
        assertEquals(Invariants.Status.PASS, RunPlan.judged("L45", Invariants.Item.pass("L45"), true).status());
    }

    @Test
    void twoJudgementsOfOneItemKeepTheOneFurtherFromAPass() {
        Invariants.Item pass = Invariants.Item.pass("L45"), fail = Invariants.Item.fail("L45", "x"), nj = Invariants.Item.notJudged("L45", "y"),
                refused = Invariants.Item.refused("L45", "z");
        assertEquals(fail, RunPlan.worse(pass, fail));
        assertEquals(nj, RunPlan.worse(nj, fail));
        assertEquals(refused, RunPlan.worse(nj, refused));
    }

    @Test
    void aCandidateRefusedOnOpeningIsRefusedAndAnUnreadableOneNotJudged() {
        assertEquals(Invariants.Status.REFUSED, RunPlan.openFailure(new ConformException(Finding.REFERENCE_MISMATCH, "another prompt")).status());
        assertEquals(Invariants.Status.NOT_JUDGED, RunPlan.openFailure(new ConformException(Finding.MISSING_TENSOR, "a short file")).status());
    }
}
