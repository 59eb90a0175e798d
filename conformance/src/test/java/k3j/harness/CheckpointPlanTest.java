package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.Map;
import java.util.OptionalLong;
import k3j.model.Residency;
import k3j.plan.MemInfo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The checkpoint gates' memory plan from -Dk3.trunk / -Dk3.trunkGb / -Dk3.cacheGb / -Dk3.preset, as {@code k3 conform}'s flags give it. */
class CheckpointPlanTest {
    private static final MemInfo MEM = new MemInfo(OptionalLong.empty(), OptionalLong.of(64_000_000_000L));
    private static final String[] KEYS = {"k3.trunk", "k3.trunkGb", "k3.cacheGb", "k3.preset"};

    private static Residency with(Map<String, String> props) {
        try {
            props.forEach(System::setProperty);
            return CheckpointUnderTest.residency(MEM);
        } finally {
            for (String k : KEYS) System.clearProperty(k);
        }
    }

    @Test
    void noPropertyIsTheResidentRun() {
        Residency r = with(Map.of());
        assertFalse(r.streamed());
        assertFalse(r.cacheGiven());
        assertEquals(Residency.RESIDENT.cacheBytes(), r.cacheBytes());
    }

    @Test
    void theBudgetsStreamTheTrunkAndCapTheCache(@TempDir Path trunk) {
        Residency r = with(Map.of("k3.trunk", trunk.toString(), "k3.trunkGb", "2.5", "k3.cacheGb", "0.3"));
        assertTrue(r.streamed() && r.cacheGiven() && !r.ultra());
        assertEquals(300_000_000L, r.cacheBytes());
        assertEquals(2_500_000_000L, r.trunkOptions().budgetBytes());
        Residency u = with(Map.of("k3.trunk", trunk.toString(), "k3.preset", "ultra", "k3.cacheGb", "0.5"));
        assertTrue(u.ultra());
        assertEquals(500_000_000L, u.cacheBytes(), "a budget overrides the preset's");
        assertEquals(2_500_000_000L, u.trunkOptions().budgetBytes(), "the preset's trunk budget");
    }

    @Test
    void aPresetWithoutATrunkOrABadBudgetFailsNamingTheProperty(@TempDir Path trunk) {
        assertTrue(assertThrows(AssertionError.class, () -> with(Map.of("k3.preset", "laptop"))).getMessage().contains("-Dk3.trunk=DIR"));
        assertTrue(assertThrows(AssertionError.class, () -> with(Map.of("k3.cacheGb", "lots"))).getMessage().contains("-Dk3.cacheGb"));
        assertTrue(assertThrows(AssertionError.class, () -> with(Map.of("k3.trunk", trunk.resolve("absent").toString()))).getMessage().contains("not a directory"));
    }
}
