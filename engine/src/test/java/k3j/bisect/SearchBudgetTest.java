package k3j.bisect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class SearchBudgetTest {
    @Test
    void aCountOrATime() {
        assertEquals(new SearchBudget(200, null), SearchBudget.parse("200"));
        assertEquals(new SearchBudget(0, Duration.ofSeconds(90)), SearchBudget.parse("90s"));
        assertEquals(new SearchBudget(0, Duration.ofMinutes(10)), SearchBudget.parse("10m"));
        assertEquals(new SearchBudget(0, Duration.ofMinutes(90)), SearchBudget.parse("1.5h"));
        for (String bad : new String[] {"0", "-3", "ten", "5d", "", "0s"}) assertThrows(IllegalArgumentException.class, () -> SearchBudget.parse(bad), bad);
    }

    @Test
    void exhaustion() {
        SearchBudget n = SearchBudget.parse("3");
        assertFalse(n.exhausted(2, Long.MAX_VALUE));
        assertTrue(n.exhausted(3, 0));
        SearchBudget t = SearchBudget.parse("1s");
        assertFalse(t.exhausted(1_000_000, 999_999_999L));
        assertTrue(t.exhausted(0, 1_000_000_000L));
    }

    @Test
    void fitOrderPutsCoveringExpertPairsFirst() {
        // 3 tokens, top-2; tokens 0 and 2 fail; experts 5 and 7 are routed exactly by the failing tokens; the pair 1/3
        // and the dense swap both cover them and touch one passing token (table order decides); 5/9 misses token 2
        int[] routing = {5, 1, 2, 3, 7, 1};
        boolean[] failing = {true, false, true};
        var swap57 = new Candidate.ExpertSwap(5, 7);
        var swap13 = new Candidate.ExpertSwap(1, 3);
        var dense = new Candidate.Swap("block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight");
        var swap57x = new Candidate.ExpertSwap(5, 9);
        assertEquals(java.util.List.of(swap57, swap13, dense, swap57x), Fit.order(java.util.List.of(swap13, dense, swap57x, swap57), failing, routing));
    }

    /** One budget over several failing layers: each gets what is left over the layers still to diagnose. */
    @Test
    void aBudgetIsSharedFairlyAcrossTheFailingLayers() {
        SearchBudget n = SearchBudget.parse("1000");
        assertEquals(500, n.share(0, 0, 2).candidates(), "two layers: half each");
        assertEquals(997, n.share(3, 0, 1).candidates(), "the first stopped after 3: the rest to the last");
        assertEquals(334, n.share(0, 0, 3).candidates(), "rounded up");
        assertEquals(0, n.share(1000, 0, 1).candidates(), "spent: nothing left");
        assertTrue(n.share(1000, 0, 1).exhausted(0, 0), "an empty share tries nothing");
        SearchBudget t = SearchBudget.parse("90s");
        assertEquals(30_000_000_000L, t.share(0, 0, 3).nanos());
        assertEquals(-1, t.share(0, 0, 3).candidates(), "a time budget has no count limit");
        assertEquals("30 s of 90 s", t.share(0, 0, 3).describe());
    }
}
