package k3j.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.TensorInfo;
import k3j.testkit.ReleasedLayout;
import org.junit.jupiter.api.Test;

class WorkPlanTest {
    @Test
    void equalLayersSplitOnAttnResBlocks() {
        long[] w = new long[93];
        Arrays.fill(w, 100);
        WorkPlan p = WorkPlan.balance(93, w, w, 0, 0, 12, 8);
        List<String> got = p.parts().stream().map(x -> k3j.compare.LayerSelection.format(x.layers())).toList();
        assertEquals(List.of("0-11", "12-23", "24-35", "36-47", "48-59", "60-71", "72-83", "84-92"), got);
    }

    @Test
    void aCutOffABlockOnlyWhenTheBlockCostsTooMuch() {
        // layer 5 weighs as much as 10 others: the best cut parts block 0 there, and no block-aligned cutting is within 5 %
        long[] w = new long[24];
        Arrays.fill(w, 10);
        w[5] = 100;
        WorkPlan p = WorkPlan.balance(24, w, w, 0, 0, 12, 2);
        assertEquals(List.of(0, 1, 2, 3, 4, 5, 6), p.part(0).layers(), "170 units at best, 210 on the block boundary: the best cut");
        // the best cut (13: 130 | 130) and the block boundary (12: 120 | 134) 3 % apart: the boundary
        long[] near = new long[24];
        Arrays.fill(near, 10);
        near[23] = 24;
        assertEquals(12, WorkPlan.balance(24, near, near, 0, 0, 12, 2).part(1).layers().getFirst(), "within 5 %: the block boundary");
        near[23] = 30;
        assertEquals(13, WorkPlan.balance(24, near, near, 0, 0, 12, 2).part(1).layers().getFirst(), "7.7 % over the best: not the boundary");
    }

    @Test
    void theLogitPartIsAnItemAtTheEndAndEveryLayerIsInExactlyOnePart() {
        long[] w = new long[13];
        Arrays.fill(w, 10);
        WorkPlan p = WorkPlan.balance(13, w, w, 200, 50, 12, 3);
        assertTrue(p.part(2).logits() && p.part(2).layers().isEmpty(), "the heavy logit part alone: " + p.parts());
        List<Integer> all = new ArrayList<>();
        p.parts().forEach(x -> all.addAll(x.layers()));
        assertEquals(java.util.stream.IntStream.range(0, 13).boxed().toList(), all);
        assertThrows(IllegalArgumentException.class, () -> WorkPlan.balance(13, w, w, 200, 50, 12, 15), "more shards than items");
    }

    /** The released layout (headers only, k3j.testkit.ReleasedLayout) in 8 shards: the figures docs/measurements.md quotes. */
    @Test
    void releasedWidthsInEightShards() {
        ModelConfig cfg = ConfigReader.read(Path.of("..", "oracle-fixtures", "config", "released.json"));
        List<TensorInfo> tensors = new ArrayList<>();
        for (ReleasedLayout.Spec s : ReleasedLayout.released().tensors()) tensors.add(new TensorInfo(s.name(), 0, Path.of("x"), s.dtype(), s.shape(), 0, s.bytes()));
        for (boolean experts : new boolean[] {false, true}) {
            WorkPlan p = WorkPlan.of(tensors, cfg, 16, 8, true, experts, 8);
            long max = p.parts().stream().mapToLong(WorkPlan.Part::work).max().orElseThrow();
            System.out.println("released widths, 16 tokens, 8 generated, " + (experts ? "--experts" : "per-layer + logits") + ": " + p.parts().size() + " shards");
            for (WorkPlan.Part x : p.parts()) {
                System.out.printf(Locale.ROOT, "  shard %d  %-14s %2d layers%s  read %8.1f GB  work %6.3f of the heaviest%n", x.shard(),
                        x.layers().isEmpty() ? "-" : k3j.compare.LayerSelection.format(x.layers()), x.layers().size(), x.logits() ? " + logits" : "          ",
                        x.bytesRead() / 1e9, x.work() / (double) max);
            }
            List<Integer> all = new ArrayList<>();
            p.parts().forEach(x -> all.addAll(x.layers()));
            assertEquals(93, all.size());
            assertEquals(all, all.stream().sorted().toList());
            if (experts) {
                System.out.print(p.table());
                everyExpertOnce(p, cfg);
                // the logit part is one item heavier than a shard's share: the sweep fills the other shards to one level
                long[] rest = p.parts().stream().filter(x -> !x.logits()).mapToLong(WorkPlan.Part::work).toArray();
                long hi = Arrays.stream(rest).max().orElseThrow(), lo = Arrays.stream(rest).min().orElseThrow();
                assertTrue(hi <= 1.01 * lo, "the sweep (1.4 TB) fills the shards to one level: " + Arrays.toString(rest));
            }
        }
    }

    /** Every routed expert of every MoE layer is in exactly one part's ranges, and the plan's text reads back. */
    static void everyExpertOnce(WorkPlan p, ModelConfig cfg) {
        java.util.Map<Integer, java.util.BitSet> seen = new java.util.TreeMap<>();
        for (WorkPlan.Part x : p.parts()) {
            assertEquals(x.text(), WorkPlan.Part.parse(x.shard(), x.text()).text());
            assertEquals(x.experts(), WorkPlan.Part.parse(x.shard(), x.text()).experts());
            for (WorkPlan.ExpertRange r : x.experts()) {
                java.util.BitSet b = seen.computeIfAbsent(r.layer(), l -> new java.util.BitSet());
                assertTrue(b.get(r.from(), r.to()).isEmpty(), "expert of " + r.text() + " in two parts");
                b.set(r.from(), r.to());
            }
        }
        for (var e : seen.entrySet()) assertEquals(cfg.expertCount(), e.getValue().cardinality(), "L" + e.getKey() + ": every expert once");
    }

    @Test
    void theSweepIsCutByExpertRangeToOneLevel() {
        // 4 MoE layers of 8 experts (100 bytes each) and light layers: the sweep (6400 units) spreads over 3 shards
        long[] w = {10, 10, 10, 10};
        WorkPlan layersOnly = WorkPlan.balance(4, w, w, 0, 0, 12, 3);
        WorkPlan p = layersOnly.withSweep(new long[] {100, 100, 100, 100}, 8);
        long[] work = p.parts().stream().mapToLong(WorkPlan.Part::work).toArray();
        double level = Arrays.stream(work).average().orElseThrow();
        for (long x : work) assertTrue(Math.abs(x - level) <= 200, "each within one expert (200 units) of the level " + level + ": " + Arrays.toString(work));
        assertTrue(p.parts().stream().anyMatch(x -> x.experts().stream().anyMatch(r -> r.from() > 0 || r.to() < 8)), "a layer is split by expert range: " + p.parts());
        java.util.BitSet[] seen = new java.util.BitSet[4];
        for (WorkPlan.Part x : p.parts()) for (WorkPlan.ExpertRange r : x.experts()) {
            if (seen[r.layer()] == null) seen[r.layer()] = new java.util.BitSet();
            assertTrue(seen[r.layer()].get(r.from(), r.to()).isEmpty());
            seen[r.layer()].set(r.from(), r.to());
        }
        for (java.util.BitSet b : seen) assertEquals(8, b.cardinality());
        assertEquals("L3:5-7", WorkPlan.ExpertRange.parse("L3:5-7").text());
        assertThrows(IllegalArgumentException.class, () -> WorkPlan.ExpertRange.parse("L3:7-5"));
        assertThrows(IllegalArgumentException.class, () -> WorkPlan.Part.parse(0, "0-3 + lgits"));
    }
}
