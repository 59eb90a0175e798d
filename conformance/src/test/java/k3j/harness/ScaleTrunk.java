package k3j.harness;

import java.nio.file.Path;
import k3j.io.CheckpointIndex;
import k3j.trunk.Progress;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPacker;

/**
 * The trunk packed from the scale fixture, shared by the scale gates: {@code build/scale-k3-trunk} ({@code -Dk3.scratch=DIR}
 * puts it under DIR), packed at most once per test JVM. A trunk already on disk is kept only when its trunk.json binds
 * to the fixture's shards (the product's own binding check, which ScaleBindingGate shows refusing one flipped byte);
 * otherwise it is packed again. The memo cannot vouch for itself: what vouches is that check, run on every first use.
 */
public final class ScaleTrunk {
    private static Path packed, from;

    private ScaleTrunk() {}

    /** The trunk of {@code model} (the scale fixture), packed in this JVM unless one on disk binds to it. */
    public static synchronized Path of(Path model) {
        if (packed != null && from.equals(model)) return packed;
        Path trunk = Path.of(System.getProperty("k3.scratch", Project.root().resolve("build").toString())).resolve("scale-k3-trunk");
        CheckpointIndex index = CheckpointIndex.open(model);
        if (!binds(trunk, index)) TrunkPacker.pack(index, trunk, Progress.silent(), s -> {}, null);
        packed = trunk;
        from = model;
        return trunk;
    }

    private static boolean binds(Path trunk, CheckpointIndex index) {
        try {
            TrunkManifest.read(trunk).checkSource(index);
            return true;
        } catch (TrunkException e) {
            return false;
        }
    }
}
