package k3j.fleet;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import org.junit.jupiter.api.Test;

class ShardIdTest {
    @Test
    void theFormAndEachLaunchersIndex() {
        assertEquals(new ShardId(3, 8), ShardId.parse("3/8", Map.of()));
        assertEquals(new ShardId(5, 8), ShardId.parse("auto", Map.of("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "8")));
        assertEquals(new ShardId(5, 8), ShardId.parse("auto", Map.of("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "0", "SLURM_ARRAY_TASK_MAX", "7")));
        // a resubmitted task (--array=5) sees an array of one: K3_SHARD_COUNT wins
        assertEquals(new ShardId(5, 8), ShardId.parse("auto", Map.of("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_COUNT", "1", "K3_SHARD_COUNT", "8")));
        assertEquals(new ShardId(2, 8), ShardId.parse("auto", Map.of("JOB_COMPLETION_INDEX", "2", "K3_SHARD_COUNT", "8")));
        assertEquals(new ShardId(7, 8), ShardId.parse("auto", Map.of("PBS_ARRAY_INDEX", "7", "K3_SHARD_COUNT", "8")));
        assertEquals("shard-3-of-8", new ShardId(3, 8).folderName());
    }

    @Test
    void neverAGuessedCountOrIndex() {
        assertTrue(assertThrows(IllegalArgumentException.class, () -> ShardId.parse("auto", Map.of("JOB_COMPLETION_INDEX", "2"))).getMessage().contains("K3_SHARD_COUNT"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> ShardId.parse("auto", Map.of("SLURM_ARRAY_TASK_ID", "2"))).getMessage().contains("no count"));
        assertTrue(assertThrows(IllegalArgumentException.class, () -> ShardId.parse("auto", Map.of())).getMessage().contains("SLURM_ARRAY_TASK_ID"));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("auto", Map.of("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_MIN", "3", "SLURM_ARRAY_TASK_MAX", "7")));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("8/8", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("-1/8", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("3", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("a/b", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> ShardId.parse("auto", Map.of("PBS_ARRAY_INDEX", "9", "K3_SHARD_COUNT", "8")));
    }
}
