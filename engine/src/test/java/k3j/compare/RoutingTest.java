package k3j.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import k3j.verdict.Finding;
import org.junit.jupiter.api.Test;

class RoutingTest {
    // one token, 5 experts, top-2; reference scores: e0 0.9, e1 0.5, e2 0.5 + 1e-9, e3 0.1, e4 0.7
    static final float[] CHOICE = {0.9f, 0.5f, (float) (0.5 + 1e-9), 0.1f, 0.7f};

    @Test
    void aSwapWithinTheToleranceIsANearTie() {
        // reference picks [0, 4]; a flip between 1 and 2 does not show in top-2, so use top-3: [0, 4, 2] vs [0, 4, 1]
        Routing r = Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 1}, 3, CHOICE, 5, 1e-6);
        assertEquals(1, r.tokensDiffering());
        assertTrue(r.onlyNearTies(), r.toString());
        assertFalse(r.wrong());
    }

    @Test
    void anOrderSwapOfDistantScoresIsWrong() {
        Routing r = Routing.compare(new int[] {0, 4, 2}, new int[] {4, 0, 2}, 3, CHOICE, 5, 1e-6);
        assertTrue(r.wrong(), r.toString());
    }

    @Test
    void aDifferentExpertFarBelowIsWrong() {
        assertTrue(Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 3}, 3, CHOICE, 5, 1e-6).wrong());
    }

    @Test
    void aDuplicatedExpertIsWrongEvenWithEqualScores() {
        assertTrue(Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 4}, 3, new float[] {0.9f, 0.5f, 0.7f, 0.1f, 0.7f}, 5, 1e-6).wrong());
    }

    @Test
    void withoutAToleranceEveryDifferenceIsWrong() {
        assertTrue(Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 1}, 3).wrong());
        assertTrue(Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 1}, 3, CHOICE, 5, 0).wrong());
    }

    @Test
    void aNearTieWithAStageOverBudgetIsStillThatStagesFinding() {
        StageMetric over = StageMetric.of("mlp_out", 4, new float[] {1, 2, 3, 4}, new float[] {1, 2, 3, 5}, 1e-6);
        Routing near = Routing.compare(new int[] {0, 4, 2}, new int[] {0, 4, 1}, 3, CHOICE, 5, 1e-6);
        assertEquals(Finding.BINDING_ERROR, Conformance.judge(1, "KDA", java.util.List.of(over), near, 0).finding());
        StageMetric fine = StageMetric.of("mlp_out", 4, new float[] {1, 2, 3, 4}, new float[] {1, 2, 3, 4}, 1e-6);
        LayerReport r = Conformance.judge(1, "KDA", java.util.List.of(fine), near, 0);
        assertEquals(Finding.NEAR_TIE, r.finding());
        assertTrue(r.conforms() && r.message().startsWith("[near-tie]"), r.message());
    }
}
