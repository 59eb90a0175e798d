package k3j.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import k3j.io.DType;

/**
 * Writes a small checkpoint with the released K3's layer names ({@code language_model.model.layers.<L>.},
 * routed experts under {@code .block_sparse_moe.experts.}) whose every byte is a marker of (seed, layer,
 * tensor, position), so a byte copied from the wrong place, layer or offset shows. Two shards; within a
 * shard each layer's trunk tensors come first and contiguous, then its routed experts, while the header
 * lists names sorted, as real shards do. Run lengths differ per layer and are not multiples of 4096.
 * A {@link Defect} breaks layer 1 in one of the ways the packer must refuse. For tests and benchmarks.
 */
public final class MarkedCheckpoint {
    public enum Defect {
        NONE,
        /** a routed expert tensor sits between two of layer 1's trunk tensors */
        GAP_IN_LAYER_1,
        /** layer 1's last trunk tensor is in the second shard */
        LAYER_1_SPANS_SHARDS
    }

    public static final String PREFIX = "language_model.model.layers.";
    static final int HIDDEN = 16;

    private record Entry(String name, String dtype, long[] shape, int layer, int index, int shard) {
        long bytes() {
            long n = DType.parse(dtype).size();
            for (long d : shape) n *= d;
            return n;
        }
    }

    private MarkedCheckpoint() {}

    /** The marker byte at position {@code i} of tensor {@code index} of layer {@code layer}. */
    public static byte marker(long seed, int layer, int index, long i) {
        return (byte) Math.floorMod(seed * 101 + layer * 67L + index * 13L + 1 + i * 7 + (i >> 8), 251);
    }

    /**
     * Writes {@code layers} layers into {@code dir} (model-00001-of-00002.safetensors and ...00002...).
     * {@code scale} grows every trunk tensor's row count (1 = runs of roughly 5-20 KB).
     */
    public static List<Path> write(Path dir, int layers, int scale, long seed, Defect defect) {
        List<Entry> order = new ArrayList<>();
        int split = Math.max(1, layers / 2);
        for (int l = 0; l < layers; l++) {
            int shard = l < split ? 0 : 1;
            String p = PREFIX + l + ".";
            List<Entry> trunk = new ArrayList<>();
            List<Entry> experts = new ArrayList<>();
            int k = 0;
            trunk.add(new Entry(p + "input_layernorm.weight", "BF16", new long[] {HIDDEN}, l, k++, shard));
            trunk.add(new Entry(p + "self_attn.q_proj.weight", "BF16", new long[] {(40L + 29 * (l % 4)) * scale, HIDDEN}, l, k++, shard));
            trunk.add(new Entry(p + "self_attn.A_log", "F32", new long[] {3}, l, k++, shard));
            trunk.add(new Entry(p + "self_attn.o_proj.weight", "BF16", new long[] {HIDDEN, (24L + 8 * (l % 3)) * scale}, l, k++, shard));
            if (l == 0) {
                trunk.add(new Entry(p + "mlp.gate_proj.weight", "BF16", new long[] {96L * scale, HIDDEN}, l, k++, shard));
                trunk.add(new Entry(p + "mlp.down_proj.weight", "BF16", new long[] {HIDDEN, 96L * scale}, l, k++, shard));
            } else {
                trunk.add(new Entry(p + "block_sparse_moe.gate.weight", "BF16", new long[] {4, HIDDEN}, l, k++, shard));
                trunk.add(new Entry(p + "block_sparse_moe.gate.e_score_correction_bias", "F32", new long[] {4}, l, k++, shard));
                trunk.add(new Entry(p + "block_sparse_moe.shared_experts.down_proj.weight", "BF16", new long[] {HIDDEN, 12L * scale}, l, k++, shard));
                for (int x = 0; x < 2; x++) {
                    experts.add(new Entry(p + "block_sparse_moe.experts." + x + ".w1.weight_packed", "U8", new long[] {8, 33}, l, k++, shard));
                    experts.add(new Entry(p + "block_sparse_moe.experts." + x + ".w1.weight_scale", "U8", new long[] {8, 2}, l, k++, shard));
                }
            }
            if (l == 1 && defect == Defect.GAP_IN_LAYER_1) {
                Entry e = experts.removeFirst();
                trunk.add(2, e);
            }
            if (l == 1 && defect == Defect.LAYER_1_SPANS_SHARDS) {
                Entry last = trunk.removeLast();
                trunk.add(new Entry(last.name(), last.dtype(), last.shape(), l, last.index(), 1));
            }
            order.addAll(trunk);
            order.addAll(experts);
        }
        order.add(new Entry("language_model.model.embed_tokens.weight", "BF16", new long[] {32, HIDDEN}, layers, 0, 1));
        order.add(new Entry("language_model.lm_head.weight", "BF16", new long[] {32, HIDDEN}, layers, 1, 1));
        try {
            Files.createDirectories(dir);
            List<Path> out = new ArrayList<>();
            for (int s = 0; s < 2; s++) {
                List<Entry> in = new ArrayList<>();
                for (Entry e : order) if (e.shard() == s) in.add(e);
                Path f = dir.resolve(ReleasedLayout.shardName(s, 2));
                writeShard(f, in, seed);
                out.add(f);
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write a marked checkpoint into " + dir, e);
        }
    }

    private static void writeShard(Path file, List<Entry> entries, long seed) throws IOException {
        List<SafetensorsWriter.Entry> header = new ArrayList<>();
        long pos = 0;
        for (Entry e : entries) {
            header.add(new SafetensorsWriter.Entry(e.name(), e.dtype(), e.shape(), pos, pos + e.bytes()));
            pos += e.bytes();
        }
        try (FileChannel ch = SafetensorsWriter.open(file, SafetensorsWriter.header(Map.of(), header))) {
            for (Entry e : entries) {
                ByteBuffer b = ByteBuffer.allocate((int) e.bytes());
                for (int i = 0; i < b.capacity(); i++) b.put(marker(seed, e.layer(), e.index(), i));
                b.flip();
                while (b.hasRemaining()) ch.write(b);
            }
        }
    }
}
