package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Set;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertPart;
import k3j.config.ConfigReader;
import k3j.config.LayerKind;
import k3j.config.ModelConfig;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.model.Binder;
import k3j.model.LayerBinding;
import k3j.model.ModelBinding;
import k3j.testkit.ReleasedLayout;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Claim: the binder binds the REAL Kimi K3 layout — 96 shards, 497,052 text tensors with the released names,
 * shapes and dtypes (k3j.testkit.ReleasedLayout, data as sparse holes) under the released config.json — all 93
 * layers (69 KDA + 24 MLA) and all 82,432 routed experts, each expert ONE contiguous read, WITHOUT reading
 * tensor data: after indexing, every shard is truncated to its header, so a single data read would fail.
 * (A binder asking for names without the language_model.model. prefix binds zero layers here.)
 */
@Tag("binding")
@Epic("binding")
class RealLayoutBindingGate {
    @TempDir
    Path tmp;

    @Test
    void theBinderBindsEveryLayerAndExpertOfTheReleasedLayoutFromHeadersAlone() throws IOException {
        ModelConfig config = ConfigReader.read(Project.fixture("config/released.json"));
        ReleasedLayout.Written w = ReleasedLayout.released().write(tmp.resolve("k3"));
        try {
            CheckpointIndex index = CheckpointIndex.open(w.dir());
            assertEquals(96, index.shards().size(), "shards");
            assertEquals(497_052, index.size(), "text tensors");
            long kept = 0;
            for (Path shard : w.shards()) kept += truncateToHeader(shard);
            long t0 = System.nanoTime();
            ModelBinding b;
            try {
                b = Binder.bind(index, config);
            } catch (k3j.model.BindException e) {
                throw new AssertionError(e.getMessage() + " [missing tensor]", e);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;

            assertEquals(93, b.layers().size(), "bound layers");
            assertEquals(69, b.layers().stream().filter(l -> l.mixer() == LayerKind.KDA).count(), "KDA layers");
            assertEquals(24, b.layers().stream().filter(l -> l.mixer() == LayerKind.MLA).count(), "MLA layers");
            assertEquals("KKKM".repeat(23) + "M", mapOf(b), "layer map");
            assertEquals(82_432L, b.expertCount(), "routed experts");
            assertEquals(0, b.layers().get(0).experts().size(), "layer 0 is dense");
            int tensors = b.model().size();
            Set<String> names = new HashSet<>();
            for (LayerBinding l : b.layers()) {
                tensors += l.tensors().size();
                l.tensors().values().forEach(t -> names.add(t.name()));
                for (ExpertLocation loc : l.experts()) {
                    assertTrue(loc.contiguous(), "layer " + l.index() + ": an expert that is not one contiguous read");
                    assertEquals(17_547_264L, loc.length(), "expert bytes");
                }
            }
            // every bound name is a real one, with the prefix; the LM head has no ".model."
            assertTrue(names.stream().allMatch(n -> n.startsWith(Binder.LAYERS)), "layer tensors carry language_model.model.layers.");
            assertEquals(Binder.LM_HEAD, b.tensor(Binder.LM_HEAD).name());
            // an expert's location is its header offsets: layer 46, expert 447, w2.weight_scale
            ExpertLocation loc = b.layers().get(46).experts().get(447);
            TensorInfo w2s = index.tensor(Binder.LAYERS + "46.block_sparse_moe.experts.447.w2.weight_scale");
            assertEquals(w2s.offset() - loc.offset(), loc.partOffset(ExpertPart.W2_SCALE), "part offset from the header");
            assertEquals(w2s.file(), loc.file());
            // 93 layers x their table + 5 model-level tensors: every non-expert text tensor is bound
            assertEquals(497_052 - 82_432 * 6, tensors, "non-expert tensors bound");
            Evidence.parameter("layers bound", b.layers().size());
            Evidence.parameter("experts bound", b.expertCount());
            Evidence.parameter("tensors bound", tensors);
            Evidence.parameter("bind seconds", seconds);
            Evidence.parameter("bytes left in the shards (headers only)", kept);
        } finally {
            ReleasedLayout.delete(w);
        }
        assertTrue(Files.notExists(w.dir()), "the sparse files are deleted");
    }

    static String mapOf(ModelBinding b) {
        StringBuilder sb = new StringBuilder();
        for (LayerBinding l : b.layers()) sb.append(l.mixer().letter);
        return sb.toString();
    }

    /** Cuts a shard to [u64 length][header]: any read of tensor data afterwards is a short read. */
    static long truncateToHeader(Path shard) throws IOException {
        try (RandomAccessFile f = new RandomAccessFile(shard.toFile(), "rw")) {
            byte[] n = new byte[8];
            f.readFully(n);
            long keep = 8 + ByteBuffer.wrap(n).order(ByteOrder.LITTLE_ENDIAN).getLong();
            f.setLength(keep);
            return keep;
        }
    }
}
