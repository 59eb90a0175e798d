package k3j.io;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import k3j.testkit.ReleasedLayout;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReleasedLayoutTest {
    /** docs/semantics.md §2.5: the text model's tensor count and its layer map (zero-based MLA 3,7,...,91,92). */
    static final int RELEASED_TENSORS = 497_052;
    static final long RELEASED_DATA_BYTES = 1_559_945_240_320L;
    static final String ATTENTION = "KKKM".repeat(23) + "M";

    @TempDir
    Path dir;

    @Test
    void theReleasedGeometryHasTheReleasedCounts() {
        List<ReleasedLayout.Spec> specs = ReleasedLayout.released().tensors();
        assertEquals(RELEASED_TENSORS, specs.size());
        long bytes = 0;
        Set<Long> experts = new HashSet<>();
        for (ReleasedLayout.Spec s : specs) {
            bytes += s.bytes();
            if (s.group() >= 0) experts.add(s.group());
        }
        assertEquals(RELEASED_DATA_BYTES, bytes);
        assertEquals(92 * 896, experts.size());
        assertEquals(17_547_264L * 896 * 92,
                specs.stream().filter(s -> s.group() >= 0).mapToLong(ReleasedLayout.Spec::bytes).sum());
    }

    @Test
    void theWrittenSparseLayoutIndexesToTheReleasedModel() throws IOException {
        ReleasedLayout.Written w = ReleasedLayout.released().write(dir.resolve("k3"));
        try {
            assertEquals(96, w.shards().size());
            CheckpointIndex idx = CheckpointIndex.open(w.dir());
            assertEquals(RELEASED_TENSORS, idx.size());
            CheckpointSummary s = CheckpointSummary.of(idx);
            assertEquals(RELEASED_DATA_BYTES, s.dataBytes());
            assertEquals(w.fileBytes(), s.shardBytes());
            assertEquals(ATTENTION, s.attention());
            assertEquals("D" + "E".repeat(92), s.mlp());
            assertEquals(82_432, s.routedExperts());
            // an expert's six tensors share a shard (the binder reads them as one run)
            for (int layer : new int[] {1, 46, 92}) {
                for (int e : new int[] {0, 447, 895}) {
                    String p = ReleasedLayout.PREFIX + "layers." + layer + ".block_sparse_moe.experts." + e + ".";
                    int shard = idx.tensor(p + "w1.weight_packed").shard();
                    for (String x : new String[] {"w1.weight_scale", "w2.weight_packed", "w2.weight_scale", "w3.weight_packed", "w3.weight_scale"}) {
                        assertEquals(shard, idx.tensor(p + x).shard(), p + x);
                    }
                }
            }
            assertEquals(DType.F32, idx.tensor(ReleasedLayout.PREFIX + "layers.0.self_attn.A_log").dtype());
            assertEquals(DType.BF16, idx.tensor(ReleasedLayout.LM_HEAD).dtype());
        } finally {
            ReleasedLayout.delete(w);
        }
        assertTrue(Files.notExists(w.dir()));
    }

    @Test
    void aSmallGeometryKeepsTheLayerMap() {
        ReleasedLayout layout = new ReleasedLayout(ReleasedLayout.Geometry.released().withExperts(3).withShards(7));
        ReleasedLayout.Written w = layout.write(dir.resolve("small"));
        CheckpointSummary s = CheckpointSummary.of(CheckpointIndex.open(w.dir()));
        assertEquals(7, s.shards());
        assertEquals(ATTENTION, s.attention());
        assertEquals(92 * 3, s.routedExperts());
        assertEquals(23 + 68 * (28 + 18) + 24 * (22 + 18) + 5, s.tensors());
    }
}
