package k3j.io;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * What {@code k3 inspect} reports about a checkpoint, derived from its tensor NAMES alone: sizes, a dtype
 * histogram, the per-layer attention and MLP kinds and the tensor classes of docs/semantics.md §2.4.
 *
 * @param attention one character per layer 0..n-1: K (KDA: {@code self_attn.q_conv1d.weight}), M (MLA:
 *                  {@code self_attn.q_a_proj.weight}), ? (both), - (neither)
 * @param mlp       one character per layer: D (dense: {@code mlp.gate_proj.weight}), E (MoE:
 *                  {@code block_sparse_moe.gate.weight}), ? (both), - (neither)
 */
public record CheckpointSummary(int shards, long shardBytes, int tensors, long dataBytes,
                                Map<DType, Tally> dtypes, String attention, String mlp,
                                Map<TensorClass, Tally> classes, long routedExperts,
                                List<Trailing> trailing) {

    /** A count of tensors and their bytes. */
    public record Tally(long count, long bytes) {
        Tally plus(long b) {
            return new Tally(count + 1, bytes + b);
        }
    }

    /** A shard with bytes after its last tensor. */
    public record Trailing(Path file, long bytes) {}

    /** The README's tensor classes, tested in this order. */
    public enum TensorClass {
        ROUTED_EXPERT("routed expert"), SHARED_EXPERT("shared expert"), ATTENTION("attention"),
        EMBEDDING("embedding"), OTHER("other");

        private final String label;

        TensorClass(String label) {
            this.label = label;
        }

        public String label() {
            return label;
        }

        public static TensorClass of(String name) {
            if (name.contains(".block_sparse_moe.experts.")) return ROUTED_EXPERT;
            if (name.contains(".shared_experts.")) return SHARED_EXPERT;
            if (name.contains(".self_attn.")) return ATTENTION;
            if (name.contains("embed_tokens") || name.contains("lm_head")) return EMBEDDING;
            return OTHER;
        }
    }

    /** Layer indices at and above this are refused rather than summarised (the released K3 has 93 layers). */
    public static final int MAX_LAYER_INDEX = 4096;

    public static CheckpointSummary of(CheckpointIndex index) {
        long shardBytes = 0;
        List<Trailing> trailing = new ArrayList<>();
        for (SafetensorsFile s : index.shards()) {
            shardBytes += s.fileSize();
            if (s.trailingBytes() > 0) trailing.add(new Trailing(s.file(), s.trailingBytes()));
        }
        Map<DType, Tally> dtypes = new EnumMap<>(DType.class);
        Map<TensorClass, Tally> classes = new EnumMap<>(TensorClass.class);
        for (TensorClass c : TensorClass.values()) classes.put(c, new Tally(0, 0));
        TreeMap<Integer, char[]> layers = new TreeMap<>();   // layer -> {attention, mlp}
        Set<Long> experts = new HashSet<>();
        long dataBytes = 0;
        for (TensorInfo t : index.tensors()) {
            dataBytes += t.length();
            dtypes.merge(t.dtype(), new Tally(1, t.length()), (a, b) -> a.plus(t.length()));
            TensorClass c = TensorClass.of(t.name());
            classes.put(c, classes.get(c).plus(t.length()));
            String name = t.name();
            int at = name.indexOf("layers.");
            if (at < 0 || (at > 0 && name.charAt(at - 1) != '.')) continue;
            int layer = number(name, at + 7);
            if (layer < 0) continue;
            if (layer >= MAX_LAYER_INDEX) {
                // the per-layer strings are sized by the largest index: a name with layers.999999999 must not size them
                throw new CheckpointException(CheckpointException.Rule.BAD_ENTRY, t.file(), name,
                        "layer index " + layer + " is past " + (MAX_LAYER_INDEX - 1) + ", the largest this reader summarises");
            }
            String suffix = name.substring(name.indexOf('.', at + 7) + 1);
            char[] kinds = layers.computeIfAbsent(layer, l -> new char[] {'-', '-'});
            switch (suffix) {
                case "self_attn.q_conv1d.weight" -> kinds[0] = mark(kinds[0], 'K');
                case "self_attn.q_a_proj.weight" -> kinds[0] = mark(kinds[0], 'M');
                case "mlp.gate_proj.weight" -> kinds[1] = mark(kinds[1], 'D');
                case "block_sparse_moe.gate.weight" -> kinds[1] = mark(kinds[1], 'E');
                default -> {
                    if (c == TensorClass.ROUTED_EXPERT && suffix.startsWith("block_sparse_moe.experts.")) {
                        int expert = number(suffix, "block_sparse_moe.experts.".length());
                        if (expert >= 0) experts.add(((long) layer << 32) | expert);
                    }
                }
            }
        }
        int n = layers.isEmpty() ? 0 : layers.lastKey() + 1;
        StringBuilder attention = new StringBuilder(n), mlp = new StringBuilder(n);
        for (int l = 0; l < n; l++) {
            char[] k = layers.getOrDefault(l, new char[] {'-', '-'});
            attention.append(k[0]);
            mlp.append(k[1]);
        }
        return new CheckpointSummary(index.shards().size(), shardBytes, index.size(), dataBytes, dtypes,
                attention.toString(), mlp.toString(), classes, experts.size(), trailing);
    }

    private static char mark(char was, char kind) {
        return was == '-' || was == kind ? kind : '?';
    }

    /** The decimal number starting at {@code from} and ended by '.', or -1 (also above 9 digits). */
    private static int number(String s, int from) {
        int end = s.indexOf('.', from);
        if (end <= from || end - from > 9) return -1;
        int v = 0;
        for (int i = from; i < end; i++) {
            char c = s.charAt(i);
            if (c < '0' || c > '9') return -1;
            v = v * 10 + (c - '0');
        }
        return v;
    }

    /** How many layers have attention kind (K, M) or MLP kind (D, E) {@code kind}. */
    public static long count(String map, char kind) {
        return map.chars().filter(c -> c == kind).count();
    }
}
