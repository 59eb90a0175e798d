package k3j.state;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.HexFormat;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;

/**
 * What a saved state belongs to: the architecture (twelve config numbers and the layers bound) and the
 * checkpoint (sha256 over every shard's name, size and safetensors header bytes — the weights are not hashed,
 * so checking is cheap; any re-export or other model changes the headers).
 */
public record Binding(int[] architecture, byte[] checkpoint) {
    static final String[] FIELDS = {"hidden", "layers bound", "vocab", "kda heads", "kda head dim", "conv kernel", "mla heads", "qk nope", "qk rope",
            "v head", "experts", "top-k"};

    public static Binding of(ModelConfig c, int layers, CheckpointIndex index) {
        return new Binding(new int[] {c.hiddenSize(), layers, c.vocabSize(), c.kdaHeads(), c.kdaHeadDim(), c.shortConvKernel(), c.mlaHeads(),
                c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim(), c.expertCount(), c.topK()}, checkpointHash(index));
    }

    static byte[] checkpointHash(CheckpointIndex index) {
        try {
            MessageDigest all = MessageDigest.getInstance("SHA-256");
            for (SafetensorsFile f : index.shards()) {
                byte[] name = f.file().getFileName().toString().getBytes(StandardCharsets.UTF_8);
                all.update(ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(name.length).putLong(f.fileSize()).array());
                all.update(name);
                try (InputStream in = Files.newInputStream(f.file())) {
                    all.update(in.readNBytes((int) Math.min(Integer.MAX_VALUE, 8 + f.headerLength())));
                }
            }
            return all.digest();
        } catch (IOException e) {
            throw new StateException("cannot read the checkpoint's headers to bind the state: " + e.getMessage(), e);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Why {@code saved} (from {@code file}) does not belong to this binding, or null when it does. */
    String mismatch(Binding saved) {
        for (int i = 0; i < FIELDS.length; i++) {
            if (saved.architecture[i] != architecture[i]) {
                return "it was written for another architecture (" + FIELDS[i] + " " + saved.architecture[i] + ", this run has " + architecture[i] + ")";
            }
        }
        if (!Arrays.equals(saved.checkpoint, checkpoint)) {
            return "it was written for other weights (checkpoint header hash " + HexFormat.of().formatHex(saved.checkpoint).substring(0, 16)
                    + "…, this model's " + HexFormat.of().formatHex(checkpoint).substring(0, 16) + "…)";
        }
        return null;
    }
}
