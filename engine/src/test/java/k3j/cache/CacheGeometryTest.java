package k3j.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CacheGeometryTest {
    static final long K3_EXPERT = 17_547_264L;

    @Test
    void k3SlotIsTheExpertPlusTwoPagesRoundedUp() {
        assertEquals(17_555_456L, CacheGeometry.slotBytes(K3_EXPERT));
        assertEquals(3 * 4096 + 2 * 4096, CacheGeometry.slotBytes(3 * 4096));
        assertEquals(6 * 4096, CacheGeometry.slotBytes(3 * 4096 + 1)); // widened window can span 5 pages + pad
    }

    @Test
    void bannersMatchThePublishedRuns() {
        assertEquals("expert cache: 341 slots x 17.56 MB = 5.99 GB (0.41% of the 1.45 TB expert pool)",
                CacheGeometry.plan(K3_EXPERT, 6_000_000_000L, 16).banner());
        assertEquals("expert cache: 113 slots x 17.56 MB = 1.98 GB (0.14% of the 1.45 TB expert pool)",
                CacheGeometry.plan(K3_EXPERT, 2_000_000_000L, 16).banner());
        assertEquals("expert cache: 740 slots x 17.56 MB = 12.99 GB (0.90% of the 1.45 TB expert pool)",
                CacheGeometry.plan(K3_EXPERT, 13_000_000_000L, 16).banner());
    }

    @Test
    void k3MinimumIsSeventeenSlots() {
        long slot = CacheGeometry.slotBytes(K3_EXPERT);
        CacheGeometry g = CacheGeometry.plan(K3_EXPERT, 17 * slot, 16);
        assertEquals(17, g.slots());
        assertEquals(16, g.protectedSlots());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CacheGeometry.plan(K3_EXPERT, 17 * slot - 1, 16));
        assertTrue(e.getMessage().contains("A cache smaller than one token's working set would evict an expert that is still being multiplied"));
        assertTrue(e.getMessage().contains("holds 16 slots"), e.getMessage());
    }

    @Test
    void protectionRingIsMinOfTopKSixtyFourAndSlotsMinusOne() {
        assertEquals(16, CacheGeometry.protectedSlots(16, 1000));
        assertEquals(64, CacheGeometry.protectedSlots(100, 1000));
        assertEquals(4, CacheGeometry.protectedSlots(16, 5));
        assertEquals(1, CacheGeometry.protectedSlots(16, 1));
    }

    @Test
    void aBudgetBeyondTheModelsExpertsTakesOnlyWhatTheyNeed() {
        long expert = 22_528;   // one mini-k3-93 expert
        CacheGeometry g = CacheGeometry.plan(expert, 64_000_000_000L, 4, 92L * 8);
        assertEquals(92 * 8, g.slots(), "64 GB for 736 experts of 22.5 KB: one slot per expert, not 2 million");
        assertEquals(92L * 8 * CacheGeometry.slotBytes(expert), g.arenaBytes());
        assertEquals(5, CacheGeometry.plan(expert, 5 * CacheGeometry.slotBytes(expert), 4, 92L * 8).slots(), "a budget below the pool is kept");
    }
}
