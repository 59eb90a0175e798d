package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import k3j.io.CheckpointIndex;
import k3j.io.TensorReader;
import k3j.trunk.LayerBytes;
import k3j.trunk.Progress;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPacker;
import k3j.trunk.TrunkPlan;
import k3j.trunk.TrunkStream;

/** A packed checkpoint (a trunk and the shards it came from) and what its stream must return. */
public final class PackedTrunk {
    private static final Consumer<String> QUIET = s -> {};

    public final Path model;
    public final TrunkManifest manifest;
    public final long slot;
    public final CheckpointIndex index;

    public PackedTrunk(Path model, TrunkManifest manifest) {
        this.model = model;
        this.manifest = manifest;
        this.index = CheckpointIndex.open(model);
        long s = 0;
        for (TrunkManifest.Layer l : manifest.layers()) s = Math.max(s, l.padded());
        this.slot = s;
    }

    /** Packs {@code model}'s trunk (the default layout, silently) into a new folder under {@code scratch}; returns that folder. */
    public static Path pack(Path model, Path scratch) {
        Path out = scratch.resolve("trunk-" + System.nanoTime());
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkPacker.pack(index, TrunkPacker.layout(index, true), out, Progress.silent(), QUIET, null);
        return out;
    }

    public long padded(int l) {
        return manifest.layer(l).padded();
    }

    public TrunkStream open(long budget) {
        return open(budget, budget >= 3 * slot ? 3 : 2);
    }

    public TrunkStream open(long budget, int ring) {
        Evidence.parameter("budget bytes", budget);
        Evidence.parameter("ring slots wanted", ring);
        return TrunkStream.open(manifest, StreamOptions.budget(budget).withRing(ring)
                .withOrder(TrunkPlan.Order.LARGEST_FIRST).withNotes(QUIET));
    }

    /**
     * Binds layers {@code 0..layers-1} in order {@code passes} times (a token each) and checks every bind's bytes
     * against the shards. With {@code settle} it waits for the reader before each bind, so the read counts are
     * exact; without, the reader races the walk. Returns the ring slot of every bind, in order.
     */
    public List<Integer> walk(TrunkStream s, int passes, int layers, boolean settle) {
        List<Integer> slots = new ArrayList<>();
        for (int pass = 0; pass < passes; pass++) {
            for (int l = 0; l < layers; l++) {
                if (settle) s.awaitIdle();
                try (LayerBytes b = s.acquire(l)) {
                    slots.add(b.slot());
                    checkBytes(b);
                }
            }
        }
        return slots;
    }

    /** The layer's every tensor equals the shard's bytes, read through the checkpoint reader. */
    public void checkBytes(LayerBytes b) {
        try (TensorReader r = new TensorReader(); Arena arena = Arena.ofConfined()) {
            assertEquals(manifest.layer(b.layer()).tensors().keySet(), b.tensors().keySet());
            for (String name : b.tensors().keySet()) {
                MemorySegment want = r.read(index.tensor(name), arena);
                long at = want.mismatch(b.tensor(name));
                if (at != -1) fail("layer " + b.layer() + " (" + b + ") tensor " + name + " differs from the shard at byte " + at);
            }
        }
    }
}
