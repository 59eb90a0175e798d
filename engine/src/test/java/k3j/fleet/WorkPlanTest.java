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
        List<String> got = p.parts().stream().map(x -> k3j.conform.LayerSelection.format(x.layers())).toList();
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
                        x.layers().isEmpty() ? "-" : k3j.conform.LayerSelection.format(x.layers()), x.layers().size(), x.logits() ? " + logits" : "          ",
                        x.bytesRead() / 1e9, x.work() / (double) max);
            }
            List<Integer> all = new ArrayList<>();
            p.parts().forEach(x -> all.addAll(x.layers()));
            assertEquals(93, all.size());
            assertEquals(all, all.stream().sorted().toList());
        }
    }
}
