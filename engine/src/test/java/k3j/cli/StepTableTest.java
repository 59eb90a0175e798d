package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class StepTableTest {
    @Test
    void theCacheHitColumnRoundsAsTheCacheReportDoes() {
        StepTable t = new StepTable();
        String row = t.add(new StepTable.Row(0, 42, 1, 0.5, 100.0 * 1467 / 1472, 3_000_000, 0.1));
        String[] cols = row.trim().split(" +");
        assertEquals("99.66", cols[5], "CACHE HIT: two decimals, never rounded up to 100.0: " + row);
        assertEquals(String.format(java.util.Locale.ROOT, "%.2f", 100.0 * 1467 / 1472), cols[5]);
    }

    @Test
    void theReadColumnIsInHumanUnitsDownToBytes() {
        StepTable t = new StepTable();
        assertEquals(java.util.List.of("12.80", "KB"), java.util.List.of(t.add(new StepTable.Row(0, 42, 1, 0.5, 50, 12_800, 0.1)).trim().split(" +")).subList(6, 8));
        assertEquals(java.util.List.of("0", "B"), java.util.List.of(t.add(new StepTable.Row(1, 42, 1, 0.5, 50, 0, 0.1)).trim().split(" +")).subList(6, 8));
        assertEquals(java.util.List.of("3.00", "MB"), java.util.List.of(t.add(new StepTable.Row(2, 42, 1, 0.5, 50, 3_000_000, 0.1)).trim().split(" +")).subList(6, 8));
    }
}
