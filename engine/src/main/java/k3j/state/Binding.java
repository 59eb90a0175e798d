package k3j.state;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;
import k3j.trunk.DataBinding;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;

/**
 * What a saved state belongs to (docs/formats.md §14): the architecture (twelve config numbers and the layers
 * bound), the checkpoint's layout (sha256 over every shard's name, size and safetensors header bytes) and its data:
 * the trunk digest, a SHA-256 over the data digest of every decoder-layer tensor that is not a routed expert (the
 * tensors a packed trunk holds), taken from trunk.json when the run streams a trunk (whose binding to the shards is
 * checked at open) and from the shards otherwise. Each shard's file identity is recorded beside it. The routed
 * experts (1.45 TB on the released checkpoint) carry no data digest: they are bound by the shards' file identity
 * alone. So a load whose shards are the same unchanged files is accepted; any other load is refused: when the trunk
 * digest recomputed from them differs, as other weights; when it matches, because the routed experts the state was
 * built from cannot be checked (a copied checkpoint, or an expert byte written in place, looks the same).
 */
public final class Binding {
    static final String[] FIELDS = {"hidden", "layers bound", "vocab", "kda heads", "kda head dim", "conv kernel", "mla heads", "qk nope", "qk rope",
            "v head", "experts", "top-k"};

    private final int[] architecture;
    private final byte[] checkpoint;
    private final CheckpointIndex index;
    private final TrunkManifest trunk;
    private byte[] data;

    /** A binding to the architecture and headers alone (no checkpoint to hash: a state is refused unless those differ first). */
    public Binding(int[] architecture, byte[] checkpoint) {
        this(architecture, checkpoint, null, null);
    }

    private Binding(int[] architecture, byte[] checkpoint, CheckpointIndex index, TrunkManifest trunk) {
        this.architecture = architecture.clone();
        this.checkpoint = checkpoint.clone();
        this.index = index;
        this.trunk = trunk;
    }

    /** A resident run's binding: the trunk digest is hashed from the shards when it is needed. */
    public static Binding of(ModelConfig c, int layers, CheckpointIndex index) {
        return of(c, layers, index, null);
    }

    /** A run's binding; {@code trunk} (null when resident) is the packed trunk the run streams, checked against {@code index} at open. */
    public static Binding of(ModelConfig c, int layers, CheckpointIndex index, TrunkManifest trunk) {
        return new Binding(new int[] {c.hiddenSize(), layers, c.vocabSize(), c.kdaHeads(), c.kdaHeadDim(), c.shortConvKernel(), c.mlaHeads(),
                c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim(), c.expertCount(), c.topK()}, checkpointHash(index), index, trunk);
    }

    public int[] architecture() {
        return architecture.clone();
    }

    /** The layout hash (headers, names, sizes). */
    public byte[] checkpoint() {
        return checkpoint.clone();
    }

    /** The trunk digest over the first {@code architecture[1]} layers (computed once). */
    synchronized byte[] data() {
        if (data == null) {
            if (index == null) throw new StateException("this binding has no checkpoint to hash the state's weights against");
            try {
                data = DataBinding.trunkDigest(index, trunk, architecture[1]);
            } catch (TrunkException e) {
                throw new StateException("cannot hash the checkpoint's trunk tensors to bind the state: " + e.getMessage(), e);
            }
        }
        return data.clone();
    }

    /** The shards' file identities now (empty without a checkpoint). */
    List<DataBinding.FileIdentity> identities() {
        return index == null ? List.of() : new ArrayList<>(DataBinding.identitiesOf(index).values());
    }

    static byte[] checkpointHash(CheckpointIndex index) {
        try {
            MessageDigest all = MessageDigest.getInstance("SHA-256");
            for (SafetensorsFile f : index.shards()) {
                byte[] name = f.file().getFileName().toString().getBytes(StandardCharsets.UTF_8);
                all.update(ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(name.length).putLong(f.fileSize()).array());
                all.update(name);
                try (var in = k3j.io.SafeFiles.newInputStream(f.file(), "a checkpoint shard")) {
                    all.update(in.readNBytes((int) Math.min(Integer.MAX_VALUE, 8 + f.headerLength())));
                }
            }
            return all.digest();
        } catch (java.io.IOException e) {
            throw new StateException("cannot read the checkpoint's headers to bind the state: " + e.getMessage(), e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Why a state saved with {@code arch} and {@code header} does not belong to this binding's architecture and layout, or null. */
    String layoutMismatch(int[] arch, byte[] header) {
        for (int i = 0; i < FIELDS.length; i++) {
            if (arch[i] != architecture[i]) {
                return "it was written for another architecture (" + FIELDS[i] + " " + arch[i] + ", this run has " + architecture[i] + ")";
            }
        }
        if (!Arrays.equals(header, checkpoint)) {
            return "it was written for other weights (checkpoint header hash " + HexFormat.of().formatHex(header).substring(0, 16)
                    + "…, this model's " + HexFormat.of().formatHex(checkpoint).substring(0, 16) + "…)";
        }
        return null;
    }

    /**
     * Why a state saved over shards of identity {@code saved} with trunk digest {@code savedData} does not belong to this
     * checkpoint's data, or null: only the same unchanged files are known to hold the data the state was built from.
     */
    String dataMismatch(List<DataBinding.FileIdentity> saved, byte[] savedData) {
        if (saved.equals(identities())) return null;
        byte[] now = data();
        if (!Arrays.equals(now, savedData)) {
            return "it was written for other weights: the shards' headers match, but their data does not (trunk digest "
                    + HexFormat.of().formatHex(savedData).substring(0, 16) + "…, this model's " + HexFormat.of().formatHex(now).substring(0, 16) + "…)";
        }
        return "the shards are not the files it was saved against, unchanged (their file identity moved: a copy, or a write since)."
                + " Their trunk tensors hash the same, but a state binds the routed experts by the shards' file identity only,"
                + " so the experts it was built from cannot be checked; run the prompt again on these shards";
    }
}
