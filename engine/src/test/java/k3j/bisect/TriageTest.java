package k3j.bisect;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import k3j.bisect.Candidate.Family;
import org.junit.jupiter.api.Test;

/**
 * The family order the evidence gives: the routed experts' own sweep verdicts decide whether the dense candidates
 * or the expert mix-ups run first, and which expert mix-ups. The candidate list is given in the order a fit-only
 * search would try it (expert swaps first, as at the released width), so an order that ignored the evidence fails.
 */
class TriageTest {
    static final Candidate SHARED = new Candidate.Swap("block_sparse_moe.shared_experts.gate_proj.weight", "block_sparse_moe.shared_experts.up_proj.weight");
    static final Candidate TRANSPOSE = new Candidate.Transpose("block_sparse_moe.shared_experts.down_proj.weight");
    static final Candidate SWAP_5_9 = new Candidate.ExpertSwap(5, 9), SWAP_2_5 = new Candidate.ExpertSwap(2, 5), SWAP_5_700 = new Candidate.ExpertSwap(5, 700);
    static final Candidate FLIP_9 = new Candidate.NibbleFlip(9, List.of(k3j.cache.ExpertPart.W1_PACKED)), FLIP_2 = new Candidate.NibbleFlip(2, List.of(k3j.cache.ExpertPart.W1_PACKED));
    static final List<Candidate> FIT_ORDER = List.of(SWAP_2_5, SWAP_5_700, FLIP_2, FLIP_9, SWAP_5_9, SHARED, TRANSPOSE);
    static final List<Family> DENSE_FIRST = List.of(Family.SAME_SHAPE_SWAP, Family.STORED_TRANSPOSE, Family.EXPERT_NIBBLE_FLIP, Family.EXPERT_W1_W3_SWAP, Family.EXPERT_SWAP);
    static final List<Family> ROUTED_FIRST = List.of(Family.EXPERT_NIBBLE_FLIP, Family.EXPERT_W1_W3_SWAP, Family.EXPERT_SWAP, Family.SAME_SHAPE_SWAP, Family.STORED_TRANSPOSE);

    static Triage evidence(List<Integer> failingExperts, List<Family> order) {
        return new Triage(FaultStage.MLP_OUT, 400, List.of(0, 1, 2), 3, "routing selects the same experts", List.of(2, 5, 9), failingExperts, null, order, "test", 0);
    }

    @Test
    void everyRoutedExpertConformingPutsTheDenseCandidatesFirst() {
        assertEquals(List.of(SHARED, TRANSPOSE, FLIP_2, FLIP_9, SWAP_2_5, SWAP_5_700, SWAP_5_9), evidence(List.of(), DENSE_FIRST).order(FIT_ORDER));
    }

    @Test
    void failingExpertsPutTheirOwnMixupsFirstTheOneExplainingBothAhead() {
        // experts 5 and 9 fail their probes, 2 conforms: 5<->9 explains both; then what explains one of them
        // (9's nibbles, 5 with an unrouted expert); the dense ones; last what touches the conforming expert 2
        assertEquals(List.of(SWAP_5_9, FLIP_9, SWAP_5_700, SHARED, TRANSPOSE, FLIP_2, SWAP_2_5), evidence(List.of(5, 9), ROUTED_FIRST).order(FIT_ORDER));
    }

    @Test
    void withoutASweepTheFamilyOrderAloneDecidesAndTheFitOrderStaysWithinAFamily() {
        assertEquals(List.of(SHARED, TRANSPOSE, FLIP_2, FLIP_9, SWAP_2_5, SWAP_5_700, SWAP_5_9), evidence(null, DENSE_FIRST).order(FIT_ORDER));
        assertEquals(List.of(FLIP_2, FLIP_9, SWAP_2_5, SWAP_5_700, SWAP_5_9, SHARED, TRANSPOSE), evidence(null, ROUTED_FIRST).order(FIT_ORDER));
    }
}
