package k3j.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.OptionalLong;
import k3j.Repo;
import org.junit.jupiter.api.Test;

/**
 * The serving plan is judged against the memory it is given (the machine's before the engine opened, so the
 * weights the engine loaded count once): refused when it does not fit, opened when it does, on tiny-k3.
 */
class ServingPlanTest {
    static final Path TINY = Repo.path("oracle-fixtures/tiny-k3");

    @Test
    void theServingPlanIsJudgedAgainstTheMemoryGiven() {
        Serving.Limits limits = new Serving.Limits(4, 4, 16, 64);
        try (Engine engine = Engine.open(TINY, Plan.resident(), Engine.Options.DEFAULTS.withThreads(1))) {
            long total = Serving.plan(engine, limits).totalBytes();
            // 95 % of the memory given may be planned: just under the plan's total is refused, just over it opens
            MachineMemory tight = new MachineMemory(OptionalLong.empty(), OptionalLong.of((long) (total / 0.95) - 1024));
            Engine.OpenException refused = assertThrows(Engine.OpenException.class, () -> Serving.open(engine, limits, tight).close());
            assertTrue(refused.planRefused(), refused.getMessage());
            assertTrue(refused.getMessage().contains("REFUSING TO START"), refused.getMessage());
            MachineMemory enough = new MachineMemory(OptionalLong.empty(), OptionalLong.of((long) (total / 0.95) + 1024));
            try (Serving s = Serving.open(engine, limits, enough)) {
                assertEquals(0, s.stats().active());
            }
        }
    }
}
