package k3j.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.kernels.Workers;
import org.junit.jupiter.api.Test;

/** A routed expert that fails to load is counted and fails the forward (RUN INVALID), never a silent drop. */
class ExpertDropTest {
    @Test
    void aFailedExpertLoadFailsTheForwardAndIsCounted() {
        try (Model m = Model.open(TinyOracleTest.tiny())) {
            ExpertSource failing = new ExpertSource() {
                @Override
                public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
                    if (layer == 2 && expert % 2 == 0) throw new ExpertLoadException(layer, expert, "short read (test)");
                    return m.experts().get(layer, expert);
                }

                @Override
                public int getMany(int layer, int... experts) {
                    return 0;
                }
            };
            Forward f = new Forward(m.weights(), failing, Workers.serial());
            ExpertDropException e = assertThrows(ExpertDropException.class, () -> f.full(TinyOracleTest.PROMPT, false, null));
            assertEquals(2, e.layer());
            assertTrue(f.expertDrops() > 0);
            assertEquals(f.expertDrops(), e.drops());
            assertEquals(2, f.layersCompleted(), "layers 0 and 1 completed, layer 2 failed");
            assertTrue(e.getMessage().contains("refusing partial MoE output"), e.getMessage());
            // the failing experts are named in the one message that fails the run (no line per expert on stderr)
            java.util.regex.Matcher named = java.util.regex.Pattern.compile("expert\\(s\\) \\[([0-9, ]+)\\]").matcher(e.getMessage());
            assertTrue(named.find(), e.getMessage());
            for (String id : named.group(1).split(", ")) assertEquals(0, Integer.parseInt(id) % 2, "only even experts fail: " + e.getMessage());
            assertEquals(e.drops(), named.group(1).split(", ").length, e.getMessage());
        }
    }
}
