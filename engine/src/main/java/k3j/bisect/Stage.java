package k3j.bisect;

import java.util.List;
import k3j.model.LayerStages;

/**
 * The compared stages of one decoder layer in the order they are computed (reference-dumps/FORMAT.md §2.2),
 * with the tensors (checkpoint suffixes after {@code layers.<L>.}) that the stage itself reads. ROUTING is the
 * MoE selection: compared exactly (same experts in the same order), before the MoE output it feeds.
 */
public enum Stage {
    ATTN_IN("attn_in", List.of("self_attention_res_")),
    ATTN_NORM("attn_norm", List.of("input_layernorm.")),
    ATTN_OUT("attn_out", List.of("self_attn.")),
    PARTIAL_ATTN("partial_attn", List.of()),
    MLP_IN("mlp_in", List.of("mlp_res_")),
    MLP_NORM("mlp_norm", List.of("post_attention_layernorm.")),
    ROUTING("moe_idx", List.of("block_sparse_moe.gate.")),
    MLP_OUT("mlp_out", List.of("mlp.", "block_sparse_moe.")),
    PARTIAL_OUT("partial_out", List.of());

    /** The dump's stage name (the array is {@code layers.<L>.<key>}). */
    public final String key;
    private final List<String> reads;

    Stage(String key, List<String> reads) {
        this.key = key;
        this.reads = reads;
    }

    /** Whether this stage's own computation reads the tensor with this layer suffix. */
    public boolean reads(String suffix) {
        for (String r : reads) if (suffix.startsWith(r)) return true;
        return false;
    }

    /** The engine's value of a float stage; null for ROUTING (ids, not floats). */
    public float[] of(LayerStages s) {
        return switch (this) {
            case ATTN_IN -> s.attnIn();
            case ATTN_NORM -> s.attnNorm();
            case ATTN_OUT -> s.attnOut();
            case PARTIAL_ATTN -> s.partialAttn();
            case MLP_IN -> s.mlpIn();
            case MLP_NORM -> s.mlpNorm();
            case ROUTING -> null;
            case MLP_OUT -> s.mlpOut();
            case PARTIAL_OUT -> s.partialOut();
        };
    }
}
