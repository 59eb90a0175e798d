package k3j.verdict;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The one decision over a run's plan: nothing planned and not judged, and no run that did not end, is ever green. */
class PlanVerdictTest {
    static final List<String> PLAN = List.of("L0", "L1", "L2", "greedy ids");

    @Test
    void everyItemJudgedAndPassedInARunThatEndedConforms() {
        PlanVerdict v = PlanVerdict.decide(PLAN, Map.of("L0", true, "L1", true, "L2", true, "greedy ids", true), true, true);
        assertEquals("CONFORMS", v.outcome());
        assertTrue((Boolean) v.json().get("green"));
    }

    @Test
    void anItemNotJudgedIsIncompleteNamingIt() {
        PlanVerdict v = PlanVerdict.decide(PLAN, Map.of("L0", true, "L2", true, "greedy ids", true), true, true);
        assertEquals("INCOMPLETE", v.outcome());
        assertEquals(List.of("L1"), v.notJudged());
        assertTrue(v.findings().isEmpty(), v.findings().toString());
        assertFalse((Boolean) v.json().get("green"));
    }

    @Test
    void aRunThatDidNotEndIsIncompleteEvenWithEveryItemPassed() {
        PlanVerdict v = PlanVerdict.decide(PLAN, Map.of("L0", true, "L1", true, "L2", true, "greedy ids", true), false, true);
        assertEquals("INCOMPLETE", v.outcome());
        assertTrue(v.notJudged().getLast().contains("did not end"), v.notJudged().toString());
    }

    @Test
    void aFailedItemWithAnotherMissingIsIncompleteNotDoesNotConform() {
        assertEquals("INCOMPLETE", PlanVerdict.decide(PLAN, Map.of("L0", false), true, true).outcome());
        assertEquals("DOES_NOT_CONFORM", PlanVerdict.decide(PLAN, Map.of("L0", true, "L1", false, "L2", true, "greedy ids", true), true, true).outcome());
    }

    @Test
    void aJudgementOfSomethingNotPlannedCountsForNothing() {
        PlanVerdict v = PlanVerdict.decide(PLAN, Map.of("L7", true, "L0", true, "L1", true, "L2", true), true, true);
        assertEquals("INCOMPLETE", v.outcome());
        assertEquals(List.of("greedy ids"), v.notJudged());
    }

    @Test
    void aRefusedItemStaysRefusedAndAnItemNotJudgedStaysIncomplete() {
        var refused = new java.util.LinkedHashMap<String, Invariants.Item>();
        for (String p : PLAN) refused.put(p, Invariants.Item.pass(p));
        refused.put("L1", Invariants.Item.refused("L1", "a non-finite stage"));
        PlanVerdict r = PlanVerdict.of(PLAN, refused, true, true);
        assertEquals("REFUSED", r.outcome());
        assertEquals(2, r.verdict().exitCode());
        refused.remove("L1");
        PlanVerdict n = PlanVerdict.of(PLAN, refused, true, true);
        assertEquals("INCOMPLETE", n.outcome());
        assertEquals(List.of("L1"), n.notJudged());
        assertEquals(3, n.verdict().exitCode());
    }

    @Test
    void aRunWithNoCheckpointSaysOnlyThat() {
        assertEquals("NO CHECKPOINT CHECKED", PlanVerdict.decide(List.of(), Map.of(), true, false).words());
        assertEquals("INCOMPLETE", PlanVerdict.decide(List.of(), Map.of(), false, false).outcome());
    }
}
