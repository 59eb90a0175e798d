package k3j.io;

import static k3j.io.Files8.entry;
import static k3j.io.Files8.write;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.io.CheckpointException.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointIndexTest {
    @TempDir
    Path dir;

    private void shard(String file, String... names) {
        StringBuilder h = new StringBuilder("{");
        for (int i = 0; i < names.length; i++) {
            if (i > 0) h.append(',');
            h.append('"').append(names[i]).append("\":").append(entry("U8", "[1]", i, i + 1));
        }
        write(dir.resolve(file), h.append('}').toString(), new byte[names.length]);
    }

    @Test
    void shardsAreNumberedInByteOrder() {
        shard("b.safetensors", "x");
        shard("B.safetensors", "y");
        shard("a.safetensors", "z");
        CheckpointIndex idx = CheckpointIndex.open(dir);
        assertEquals(List.of("B.safetensors", "a.safetensors", "b.safetensors"),
                idx.shards().stream().map(s -> s.file().getFileName().toString()).toList());
        assertEquals(0, idx.tensor("y").shard());
        assertEquals(2, idx.tensor("x").shard());
        assertEquals(3, idx.size());
    }

    @Test
    void aMissingTensorIsNamed() {
        shard("m.safetensors", "x");
        CheckpointException e = assertThrows(CheckpointException.class, () -> CheckpointIndex.open(dir).tensor("nope"));
        assertEquals(Rule.NO_SUCH_TENSOR, e.rule());
        assertEquals("nope", e.tensor());
    }

    @Test
    void aSingleFileOpens() {
        shard("one.safetensors", "x", "y");
        assertEquals(2, CheckpointIndex.open(dir.resolve("one.safetensors")).size());
    }

    @Test
    void aHeaderTensorTheIndexDoesNotListIsRefused() throws IOException {
        shard("s1.safetensors", "x", "extra");
        Files.writeString(dir.resolve(CheckpointIndex.INDEX_FILE), "{\"weight_map\":{\"x\":\"s1.safetensors\"}}");
        CheckpointException e = assertThrows(CheckpointException.class, () -> CheckpointIndex.open(dir));
        assertEquals(Rule.PARTIAL_DOWNLOAD, e.rule());
        assertTrue(e.getMessage().contains("\"extra\""), e.getMessage());
    }

    @Test
    void theIndexSelectsTheShards() throws IOException {
        shard("s1.safetensors", "x");
        shard("stray.safetensors", "x");   // not listed: ignored, so its duplicate name does not matter
        write(dir.resolve("junk.safetensors"), "[not a header", new byte[0]);   // nor its bad header
        Files.writeString(dir.resolve(CheckpointIndex.INDEX_FILE),
                "{\"metadata\":{\"total_size\":1},\"weight_map\":{\"x\":\"s1.safetensors\"}}");
        CheckpointIndex idx = CheckpointIndex.open(dir);
        assertEquals(1, idx.shards().size());
        assertEquals(dir.resolve(CheckpointIndex.INDEX_FILE), idx.indexFile().orElseThrow());
    }

    @Test
    void aNameTwiceInTheIndexIsRefused() throws IOException {
        shard("s1.safetensors", "x");
        Files.writeString(dir.resolve(CheckpointIndex.INDEX_FILE),
                "{\"weight_map\":{\"x\":\"s1.safetensors\",\"x\":\"s1.safetensors\"}}");
        assertEquals(Rule.BAD_INDEX, assertThrows(CheckpointException.class, () -> CheckpointIndex.open(dir)).rule());
    }

    @Test
    void theFirstBadShardInOrderIsReported() {
        write(dir.resolve("b.safetensors"), "[]", new byte[0]);
        write(dir.resolve("a.safetensors"), "{\"w\":1}", new byte[0]);
        CheckpointException e = assertThrows(CheckpointException.class, () -> CheckpointIndex.open(dir));
        assertEquals(dir.resolve("a.safetensors"), e.file());
    }
}
