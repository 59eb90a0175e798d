package k3j.testkit;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import k3j.io.CheckpointIndex;
import k3j.io.DType;

/**
 * Writes a checkpoint with the released Kimi K3 text model's tensor layout (names, dtypes, shapes,
 * docs/semantics.md §2.5) as SPARSE shards: real headers, data left as a hole (no disk used), plus a
 * {@code model.safetensors.index.json}. For proving the reader and the binder against the real layout
 * without the 1.5 TB of weights. Within a shard, data follows the canonical order below while the
 * header lists names sorted, so header order and data order differ as in real files.
 *
 * <p>Canonical order: per layer (norms, attention, dense MLP or MoE non-expert tensors, then experts
 * 0..n-1 each as w1/w2/w3 weight_packed, weight_scale), then model-level tensors. An expert's six tensors
 * never straddle a shard boundary.
 */
public final class ReleasedLayout {

    /**
     * The checkpoint geometry. Layer numbers are zero-based.
     *
     * @param mlaLayers the zero-based layers with gated MLA attention; every other layer is KDA
     */
    public record Geometry(int hidden, int vocab, int layers, int firstDenseLayers, int[] mlaLayers,
                           int kdaHeads, int kdaHeadDim, int convKernel, int aLogLength,
                           int mlaHeads, int qLoraRank, int kvLoraRank, int qkNopeHeadDim, int qkRopeHeadDim,
                           int vHeadDim, int denseIntermediate, int experts, int moeIntermediate,
                           int latent, int sharedIntermediate, int mxfp4Group, int shards) {

        /** The released Kimi K3 (config.json text_config, docs/semantics.md §1-2), in 96 shards. */
        public static Geometry released() {
            int[] mla = new int[24];
            for (int i = 0; i < 23; i++) mla[i] = 4 * i + 3;   // full_attn_layers 4,8,...,92 one-based
            mla[23] = 92;                                        // and 93 one-based: 91 and 92 both MLA
            return new Geometry(7168, 163840, 93, 1, mla, 96, 128, 4, 128, 96, 1536, 512, 128, 64, 128,
                    33792, 896, 3072, 3584, 6144, 32, 96);
        }

        public Geometry withExperts(int n) {
            return new Geometry(hidden, vocab, layers, firstDenseLayers, mlaLayers, kdaHeads, kdaHeadDim, convKernel,
                    aLogLength, mlaHeads, qLoraRank, kvLoraRank, qkNopeHeadDim, qkRopeHeadDim, vHeadDim,
                    denseIntermediate, n, moeIntermediate, latent, sharedIntermediate, mxfp4Group, shards);
        }

        public Geometry withShards(int n) {
            return new Geometry(hidden, vocab, layers, firstDenseLayers, mlaLayers, kdaHeads, kdaHeadDim, convKernel,
                    aLogLength, mlaHeads, qLoraRank, kvLoraRank, qkNopeHeadDim, qkRopeHeadDim, vHeadDim,
                    denseIntermediate, experts, moeIntermediate, latent, sharedIntermediate, mxfp4Group, n);
        }

        public boolean isMla(int layer) {
            for (int l : mlaLayers) if (l == layer) return true;
            return false;
        }

        public boolean isMoe(int layer) {
            return layer >= firstDenseLayers;
        }
    }

    /** One tensor to write; {@code group} ties an expert's six tensors together (-1 for a tensor alone). */
    public record Spec(String name, DType dtype, long[] shape, long group) {
        public long bytes() {
            long n = dtype.size();
            for (long d : shape) n = Math.multiplyExact(n, d);
            return n;
        }
    }

    /** What {@link #write} produced. */
    public record Written(Path dir, List<Path> shards, int tensors, long dataBytes, long fileBytes) {}

    public static final String PREFIX = "language_model.model.";
    public static final String LM_HEAD = "language_model.lm_head.weight";

    private final Geometry g;

    public ReleasedLayout(Geometry g) {
        this.g = g;
    }

    public static ReleasedLayout released() {
        return new ReleasedLayout(Geometry.released());
    }

    public Geometry geometry() {
        return g;
    }

    /** Every tensor in canonical order. */
    public List<Spec> tensors() {
        List<Spec> out = new ArrayList<>();
        long e = g.hidden();
        long kdaWidth = (long) g.kdaHeads() * g.kdaHeadDim();
        for (int layer = 0; layer < g.layers(); layer++) {
            String p = PREFIX + "layers." + layer + ".";
            bf16(out, p + "input_layernorm.weight", e);
            bf16(out, p + "post_attention_layernorm.weight", e);
            bf16(out, p + "self_attention_res_norm.weight", e);
            bf16(out, p + "self_attention_res_proj.weight", 1, e);
            bf16(out, p + "mlp_res_norm.weight", e);
            bf16(out, p + "mlp_res_proj.weight", 1, e);
            String a = p + "self_attn.";
            if (g.isMla(layer)) {
                long qHead = g.qkNopeHeadDim() + g.qkRopeHeadDim();
                long out_ = (long) g.mlaHeads() * g.vHeadDim();
                bf16(out, a + "q_a_proj.weight", g.qLoraRank(), e);
                bf16(out, a + "q_a_layernorm.weight", g.qLoraRank());
                bf16(out, a + "q_b_proj.weight", g.mlaHeads() * qHead, g.qLoraRank());
                bf16(out, a + "kv_a_proj_with_mqa.weight", g.kvLoraRank() + g.qkRopeHeadDim(), e);
                bf16(out, a + "kv_a_layernorm.weight", g.kvLoraRank());
                bf16(out, a + "kv_b_proj.weight", (long) g.mlaHeads() * (g.qkNopeHeadDim() + g.vHeadDim()), g.kvLoraRank());
                bf16(out, a + "o_proj.weight", e, out_);
                bf16(out, a + "g_proj.weight", out_, e);
            } else {
                for (String x : new String[] {"q", "k", "v", "g"}) bf16(out, a + x + "_proj.weight", kdaWidth, e);
                bf16(out, a + "o_proj.weight", e, kdaWidth);
                for (String x : new String[] {"q", "k", "v"}) bf16(out, a + x + "_conv1d.weight", kdaWidth, 1, g.convKernel());
                bf16(out, a + "f_a_proj.weight", g.kdaHeadDim(), e);
                bf16(out, a + "f_b_proj.weight", kdaWidth, g.kdaHeadDim());
                bf16(out, a + "b_proj.weight", g.kdaHeads(), e);
                out.add(new Spec(a + "A_log", DType.F32, new long[] {g.aLogLength()}, -1));
                out.add(new Spec(a + "dt_bias", DType.F32, new long[] {kdaWidth}, -1));
                bf16(out, a + "o_norm.weight", g.kdaHeadDim());
            }
            if (!g.isMoe(layer)) {
                bf16(out, p + "mlp.gate_proj.weight", g.denseIntermediate(), e);
                bf16(out, p + "mlp.up_proj.weight", g.denseIntermediate(), e);
                bf16(out, p + "mlp.down_proj.weight", e, g.denseIntermediate());
                continue;
            }
            String m = p + "block_sparse_moe.";
            bf16(out, m + "gate.weight", g.experts(), e);
            out.add(new Spec(m + "gate.e_score_correction_bias", DType.F32, new long[] {g.experts()}, -1));
            bf16(out, m + "routed_expert_down_proj.weight", g.latent(), e);
            bf16(out, m + "routed_expert_up_proj.weight", e, g.latent());
            bf16(out, m + "routed_expert_norm.weight", g.latent());
            bf16(out, m + "shared_experts.gate_proj.weight", g.sharedIntermediate(), e);
            bf16(out, m + "shared_experts.up_proj.weight", g.sharedIntermediate(), e);
            bf16(out, m + "shared_experts.down_proj.weight", e, g.sharedIntermediate());
            long in = g.moeIntermediate(), lt = g.latent(), grp = g.mxfp4Group();
            for (int x = 0; x < g.experts(); x++) {
                String q = m + "experts." + x + ".";
                long group = ((long) layer << 32) | x;
                // MXFP4: two 4-bit values per byte, one E8M0 scale byte per group of 32
                out.add(new Spec(q + "w1.weight_packed", DType.U8, new long[] {in, lt / 2}, group));
                out.add(new Spec(q + "w1.weight_scale", DType.U8, new long[] {in, lt / grp}, group));
                out.add(new Spec(q + "w2.weight_packed", DType.U8, new long[] {lt, in / 2}, group));
                out.add(new Spec(q + "w2.weight_scale", DType.U8, new long[] {lt, in / grp}, group));
                out.add(new Spec(q + "w3.weight_packed", DType.U8, new long[] {in, lt / 2}, group));
                out.add(new Spec(q + "w3.weight_scale", DType.U8, new long[] {in, lt / grp}, group));
            }
        }
        bf16(out, PREFIX + "embed_tokens.weight", g.vocab(), e);
        bf16(out, PREFIX + "norm.weight", e);
        bf16(out, PREFIX + "output_attn_res_norm.weight", e);
        bf16(out, PREFIX + "output_attn_res_proj.weight", 1, e);
        bf16(out, LM_HEAD, g.vocab(), e);
        return out;
    }

    private static void bf16(List<Spec> out, String name, long... shape) {
        out.add(new Spec(name, DType.BF16, shape, -1));
    }

    /**
     * Splits the canonical list into {@code shards} runs of about equal bytes, cutting only between
     * groups, and returns each shard's tensors.
     */
    public List<List<Spec>> shards() {
        List<Spec> all = tensors();
        long total = 0;
        for (Spec s : all) total += s.bytes();
        List<List<Spec>> out = new ArrayList<>();
        for (int i = 0; i < g.shards(); i++) out.add(new ArrayList<>());
        long before = 0;
        int shard = 0;
        long group = Long.MIN_VALUE;
        for (Spec s : all) {
            boolean sameGroup = s.group() >= 0 && s.group() == group;
            if (!sameGroup) {
                shard = (int) Math.min(g.shards() - 1, Math.multiplyExact(before, (long) g.shards()) / total);
                group = s.group();
            }
            out.get(shard).add(s);
            before += s.bytes();
        }
        for (int i = 0; i < out.size(); i++) {
            if (out.get(i).isEmpty()) throw new IllegalStateException("shard " + i + " of " + g.shards() + " would be empty");
        }
        return out;
    }

    public static String shardName(int i, int n) {
        return String.format("model-%05d-of-%05d.safetensors", i + 1, n);
    }

    /** Writes the sparse shards and the index into {@code dir} (created if needed). */
    public Written write(Path dir) {
        return write(dir, shards());
    }

    /**
     * Writes {@code plan} (each shard's tensors in data order) as sparse shards plus the index into {@code dir}:
     * headers list names sorted, the data section is a hole a caller may fill at the header offsets.
     */
    public static Written write(Path dir, List<List<Spec>> plan) {
        try {
            Files.createDirectories(dir);
            List<Path> files = new ArrayList<>();
            long dataBytes = 0, fileBytes = 0;
            int count = 0;
            for (int i = 0; i < plan.size(); i++) {
                Path f = dir.resolve(shardName(i, plan.size()));
                long[] sizes = writeShard(f, plan.get(i));
                dataBytes += sizes[0];
                fileBytes += sizes[1];
                count += plan.get(i).size();
                files.add(f);
            }
            writeIndex(dir.resolve(CheckpointIndex.INDEX_FILE), plan, dataBytes);
            return new Written(dir, List.copyOf(files), count, dataBytes, fileBytes);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the layout into " + dir, e);
        }
    }

    /** Returns {data bytes, file bytes}. */
    private static long[] writeShard(Path file, List<Spec> specs) {
        List<SafetensorsWriter.Entry> entries = new ArrayList<>();
        long pos = 0;
        for (Spec s : specs) {
            entries.add(new SafetensorsWriter.Entry(s.name(), s.dtype().name(), s.shape(), pos, pos + s.bytes()));
            pos += s.bytes();
        }
        return new long[] {pos, SafetensorsWriter.writeSparse(file, SafetensorsWriter.header(Map.of("format", "pt"), entries), pos)};
    }

    private static void writeIndex(Path file, List<List<Spec>> plan, long totalSize) throws IOException {
        try (OutputStream os = Files.newOutputStream(file);
             JsonGenerator gen = new JsonFactory().createGenerator(os, JsonEncoding.UTF8)) {
            gen.useDefaultPrettyPrinter();
            gen.writeStartObject();
            gen.writeObjectFieldStart("metadata");
            gen.writeNumberField("total_size", totalSize);
            gen.writeEndObject();
            gen.writeObjectFieldStart("weight_map");
            for (int i = 0; i < plan.size(); i++) {
                String shard = shardName(i, plan.size());
                for (Spec s : plan.get(i)) gen.writeStringField(s.name(), shard);
            }
            gen.writeEndObject();
            gen.writeEndObject();
        }
    }

    /** Deletes what {@link #write} wrote (the shards, the index, and the directory if then empty). */
    public static void delete(Written w) {
        try {
            for (Path f : w.shards()) Files.deleteIfExists(f);
            Files.deleteIfExists(w.dir().resolve(CheckpointIndex.INDEX_FILE));
            try (var s = Files.list(w.dir())) {
                if (s.findAny().isEmpty()) Files.delete(w.dir());
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot delete the layout in " + w.dir(), e);
        }
    }
}
