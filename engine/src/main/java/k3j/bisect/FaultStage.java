package k3j.bisect;

import java.util.List;
import k3j.compare.LayerReport;
import k3j.compare.StageMetric;

/**
 * The stages of one decoder layer in the order they are computed (docs/formats.md §7.2.2), with the
 * tensors (checkpoint suffixes after {@code layers.<L>.}) the stage itself reads: what bisect needs to name
 * the FIRST failing stage of a {@link LayerReport} (k3j.compare compares; this only orders) and to pick the
 * candidates that can reach it. ROUTING is the MoE selection (exact) and its combine weights, computed
 * before the MoE output they feed.
 */
public enum FaultStage {
    ATTN_IN("attn_in", List.of("self_attention_res_")),
    ATTN_NORM("attn_norm", List.of("input_layernorm.")),
    ATTN_OUT("attn_out", List.of("self_attn.")),
    PARTIAL_ATTN("partial_attn", List.of()),
    MLP_IN("mlp_in", List.of("mlp_res_")),
    MLP_NORM("mlp_norm", List.of("post_attention_layernorm.")),
    ROUTING("routing", List.of("block_sparse_moe.gate.")),
    MLP_OUT("mlp_out", List.of("mlp.", "block_sparse_moe.")),
    PARTIAL_OUT("partial_out", List.of());

    /** The dump's stage name ("routing" stands for moe_idx and moe_weight). */
    public final String key;
    private final List<String> reads;

    FaultStage(String key, List<String> reads) {
        this.key = key;
        this.reads = reads;
    }

    /** Whether this stage's own computation reads the tensor with this layer suffix. */
    public boolean reads(String suffix) {
        for (String r : reads) if (suffix.startsWith(r)) return true;
        return false;
    }

    /** This stage's ratio to budget in {@code r}: routing is infinite when the selection differs; 0 for a stage the layer has not (routing of a dense layer). */
    public double ratio(LayerReport r) {
        if (this == ROUTING) {
            if (r.routing() == null) return 0.0;
            if (!r.routing().equal()) return Double.POSITIVE_INFINITY;
            return metric(r, "moe_weight");
        }
        return metric(r, key);
    }

    /** The first stage over budget in computation order, or null when every stage is within it. */
    public static FaultStage firstFailing(LayerReport r) {
        for (FaultStage s : values()) if (!(s.ratio(r) <= 1.0)) return s;
        return null;
    }

    private static double metric(LayerReport r, String name) {
        for (StageMetric m : r.stages()) if (m.stage().equals(name)) return m.ratioToBudget();
        return name.equals("moe_weight") ? 0.0 : Double.POSITIVE_INFINITY;
    }
}
