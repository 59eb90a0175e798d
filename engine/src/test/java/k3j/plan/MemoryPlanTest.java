package k3j.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import org.junit.jupiter.api.Test;

/** The plan block and refusals against the figures the C engine's README printed for the released K3. */
class MemoryPlanTest {
    static final ModelConfig K3 = ConfigReader.read(Path.of("..", "oracle-fixtures", "config", "released.json"));
    static final MemInfo README_BOX = MemInfo.parse("MemTotal:       70000000 kB\nMemAvailable:   64365234 kB\n");
    /** A JVM of 100 MB resident (heap 64 MB committed, 20 MB in use, max 6 GB; 20 threads of 1 MiB stacks). */
    static final JvmFootprint JVM = new JvmFootprint(100_000_000L, 20_000_000L, 64_000_000L, 6_000_000_000L, 15_000_000L, 8_000_000L,
            1_000_000L, 20, 1L << 20);

    @Test
    void readmePlanBlock() {
        // README: prompt 5 tokens, generating 2; trunk 16 GB streamed, expert cache 6 GB, full recompute
        MemoryPlan p = MemoryPlan.of(K3, true, 16_000_000_000L, 6_000_000_000L, false, 0, false, 5, 2, JVM);
        String block = p.block(README_BOX);
        System.out.print(block);
        assertTrue(block.contains("  trunk (STREAMED) 16.00 GB\n"), block);
        assertTrue(block.contains("  embed + lm_head  4.70 GB"), block);
        assertTrue(block.contains("  expert cache     6.00 GB\n"), block);
        assertTrue(block.contains("  recurrent state  626.25 MB\n"), block);
        assertTrue(block.contains("  buffers          6.68 MB\n"), block);
        assertTrue(block.contains("  KV cache         0 B\n"), block);
        assertTrue(block.contains("  JVM itself       100.00 MB (measured RSS; heap 64.00 MB committed, 20.00 MB in use, may grow to 6.00 GB; "
                + "metaspace 15.00 MB; code cache 8.00 MB; 20 threads x 1.05 MB stack)\n"), block);
        assertTrue(block.contains("  TOTAL            27.43 GB\n"), "the README's 27.33 GB plus the JVM: " + block);
        assertTrue(p.planRefusal(README_BOX).isEmpty());
    }

    @Test
    void theJvmsOwnFootprintIsMeasuredAndInTheTotal() {
        JvmFootprint now = JvmFootprint.measure();
        assertTrue(now.heapCommitted() > 0 && now.heapMax() >= now.heapCommitted() && now.metaspace() > 0 && now.codeCache() > 0
                && now.threads() > 0 && now.stackBytes() > 0, now.toString());
        assertTrue(now.rss() > now.metaspace(), "VmRSS on Linux: " + now);
        MemoryPlan p = MemoryPlan.of(K3, true, 1_000_000L, 0, false, 0, false, 5, 2);
        assertTrue(p.jvm().bytes() > 10_000_000L, "a JVM is tens of MB, not nothing: " + p.jvm());
        assertEquals(p.trunk() + p.modelTables() + p.recurrentState() + p.buffers() + p.jvm().bytes(), p.total());
        assertTrue(p.block(README_BOX).contains("JVM itself"), p.block(README_BOX));
    }

    @Test
    void kvPerPositionIsTheAppendixFigure() {
        assertEquals(2_365_440L, MemoryPlan.kvBytes(K3, 1));
    }

    @Test
    void planOverNinetyFivePercentIsRefusedWithExitOne() {
        MemInfo small = MemInfo.parse("MemTotal: 33554432 kB\nMemAvailable: 30000000 kB\n");   // 30.72 GB available
        MemoryPlan fits = MemoryPlan.of(K3, true, 16_000_000_000L, 7_000_000_000L, false, 0, false, 5, 8, JVM);
        MemoryPlan over = MemoryPlan.of(K3, true, 16_000_000_000L, 10_000_000_000L, false, 0, false, 5, 8, JVM);
        assertTrue(fits.planRefusal(small).isEmpty(), fits.block(small));
        var r = over.planRefusal(small).orElseThrow();
        assertEquals(1, r.exitCode());
        assertTrue(r.message().startsWith("REFUSING TO START: this needs 31.43 GB and may use at most 29.18 GB (95% of the 30.72 GB available), a shortfall of 2.25 GB."),
                r.message());
    }

    @Test
    void kvOverNinetyPercentIsRefusedWithExitTwo() {
        MemInfo mem = MemInfo.parse("MemAvailable: 10000000 kB\n");   // 10.24 GB
        MemoryPlan ok = MemoryPlan.of(K3, true, 2_500_000_000L, 0, false, 0, true, 3000, 800);   // 3801 positions, 8.99 GB
        MemoryPlan no = MemoryPlan.of(K3, true, 2_500_000_000L, 0, false, 0, true, 3000, 1000);  // 4001 positions, 9.46 GB
        assertTrue(ok.kvRefusal(mem).isEmpty());
        var r = no.kvRefusal(mem).orElseThrow();
        assertEquals(2, r.exitCode());
        assertTrue(r.message().contains("This is a MEMORY limit, not an engine ceiling"), r.message());
        assertTrue(r.message().contains("drop --incremental"), r.message());
    }

    @Test
    void ultraFullRecomputeKeepsOneStateSlot() {
        MemoryPlan p = MemoryPlan.of(K3, true, 2_500_000_000L, 310_000_000L, true, 64L << 20, false, 5, 2);
        assertEquals(6_733_824L, p.recurrentState(), "one layer's KDA state: 6.73 MB");
        assertTrue(p.block(README_BOX).contains("embed + lm_head  67.20 MB (STREAMED)"), p.block(README_BOX));
    }

    @Test
    void theUltraPresetPlansAboutThreeGbForTheReleasedModel() {
        // the preset's budgets, the streamed tables' 64 MiB chunk (k3j.model.StreamedTables.DEFAULT_CHUNK_BYTES), full recompute
        MemoryPlan p = MemoryPlan.of(K3, true, Math.round(Preset.ULTRA.trunkGb() * 1e9), Math.round(Preset.ULTRA.cacheGb() * 1e9), true, 64L << 20,
                false, 5, 2, JVM);
        String block = p.block(README_BOX);
        System.out.print(block);
        assertTrue(block.contains("  embed + lm_head  67.20 MB (STREAMED)\n"), block);
        assertTrue(block.contains("  recurrent state  6.73 MB\n"), "one state slot: " + block);
        assertTrue(block.contains("  TOTAL            2.99 GB\n"), block);
        MemoryPlan resident = MemoryPlan.of(K3, true, Math.round(Preset.ULTRA.trunkGb() * 1e9), Math.round(Preset.ULTRA.cacheGb() * 1e9), false, 0,
                false, 5, 2, JVM);
        assertEquals(4_698_669_056L - 67_202_048L + 626_250_000L - 6_733_824L, resident.total() - p.total(), 1_000_000L,
                "streaming saves the resident tables (4.70 GB) and all but one state slot");
    }

    @Test
    void everyPresetsFigureIsItsPlanForTheReleasedModelNotAMeasurement() {
        // the plan of a resident-tables run under the preset's budgets (trunk and cache at most their budget), 5 prompt ids, 2 generated
        java.util.List<String> wrong = new java.util.ArrayList<>();
        for (Preset preset : Preset.values()) {
            MemoryPlan p = MemoryPlan.of(K3, true, Math.round(preset.trunkGb() * 1e9), Math.round(preset.cacheGb() * 1e9), preset.ultra(),
                    k3j.model.StreamedTables.DEFAULT_CHUNK_BYTES, false, 5, 2, JVM);
            String planned = String.format(java.util.Locale.ROOT, "%.1f GB planned", p.total() / 1e9);
            System.out.println(preset.id() + ": " + planned + " | " + preset.note());
            if (!preset.note().startsWith("at most " + planned + " for the released model")) wrong.add(preset.id() + ": " + preset.note() + " vs " + planned);
            if (preset.note().contains("peak RSS")) wrong.add(preset.id() + ": a preset's figure is a plan; measured peaks are in docs/measurements.md");
        }
        assertTrue(wrong.isEmpty(), String.join("\n", wrong));
    }

    @Test
    void presetTableIsTheReadmes() {
        String t = Preset.table();
        System.out.print(t);
        assertTrue(t.startsWith("presets (trunk / expert-cache, in GB):\n"
                + "  ultra          2.50 / 0.31    at most 3.0 GB planned for the released model: streamed model tables, one state slot. Slow.\n"
                + "  laptop         3.00 / 1.00    at most 9.4 GB planned for the released model. The ordinary-path floor.\n"), t);
        assertTrue(t.contains("  auto"), t);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Preset.parse("huge"));
        assertTrue(e.getMessage().startsWith("unknown preset 'huge'\npresets"), e.getMessage());
        assertEquals(Preset.SERVER, Preset.parse("server"));
    }

    @Test
    void autoBudget() {
        // the README's reference box: MemAvailable 233961008 kB, MemTotal 239308464 kB -> everything pinned, rest to the cache
        AutoBudget big = AutoBudget.of(MemInfo.parse("MemTotal: 239308464 kB\nMemAvailable: 233961008 kB\n"));
        assertEquals(111, big.trunkGb(), 1e-9);
        assertTrue(big.cacheGb() > 100, big.line());
        AutoBudget mid = AutoBudget.of(MemInfo.parse("MemTotal: 33554432 kB\nMemAvailable: 30000000 kB\n"));
        // avail 30.72, reserve 2 + 0.6144 + 4.7 + 1.7 = 9.0144, usable 21.7056; ceiling 0.55 * 34.36 = 18.90; cap = 9.38
        assertEquals(9.3827, mid.trunkGb(), 1e-3, mid.line());
        assertEquals(0.5, mid.cacheGb(), 1e-9);
        assertThrows(IllegalStateException.class, () -> AutoBudget.of(MemInfo.parse("MemAvailable: 9000000 kB\n")));
        assertEquals(Preset.LAPTOP, Preset.recommend(20L << 30).preset());
        assertEquals(Preset.SERVER, Preset.recommend(192L << 30).preset());
        assertEquals(null, Preset.recommend(9L << 30).preset());
    }

    @Test
    void servingHoldsAStateForEverySequenceAndTheBuffersOfTheWidestStep() {
        MemoryPlan one = MemoryPlan.of(K3, true, 16_000_000_000L, 6_000_000_000L, false, 0, true, 100, 28, JVM);   // 129 positions
        MemoryPlan eight = one.serving(K3, 8, 129, 8 * 16);
        assertEquals(8 * one.kvCache(), eight.kvCache(), "a KV cache of 129 positions per sequence");
        assertEquals(8 * one.recurrentState(), eight.recurrentState(), "a KDA state per sequence");
        assertEquals(one.trunk() + one.expertCache() + one.modelTables(), eight.trunk() + eight.expertCache() + eight.modelTables(), "the weights once");
        assertTrue(eight.buffers() > one.serving(K3, 8, 129, 8).buffers(), "a step of 128 tokens needs more buffers than one of 8");
        assertTrue(eight.planRefusal(README_BOX).isEmpty());
        assertTrue(one.serving(K3, 64, 4097, 64).planRefusal(README_BOX).isPresent(), "64 sequences of 4097 positions do not fit 64 GB");
        assertThrows(IllegalArgumentException.class, () -> one.serving(K3, 0, 129, 8));
    }
}
