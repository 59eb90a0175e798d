package k3j.verdict;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The verdict's category is one of the findings' tags, never any bracketed text of a refusal's message. */
class VerdictCategoryTest {
    @Test
    void anIndexInBracketsIsNoCategory() {
        Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, List.of(Invariants.Item.refused("response",
                "resp.json choices[0].logprobs.content[3]: tokens[0] is not its bytes")));
        assertEquals("VERDICT: REFUSED", v.line());
    }

    @Test
    void theFirstFindingsTagIsTheCategory() {
        Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, List.of(Invariants.Item.pass("L0"),
                Invariants.Item.fail("L5", "layers[5] [binding error] L5 KDA: attn_out 3.97e+04x budget"),
                Invariants.Item.fail("logits", "[wrong constant or formula] logits")));
        assertEquals("VERDICT: DOES NOT CONFORM [binding error]", v.line());
    }
}
