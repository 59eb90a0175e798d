package k3j.dump;

import java.util.List;
import java.util.function.Function;
import k3j.model.LayerStages;

/** The compared stages of one decoder layer (docs/formats.md §7.2.2), in the order computed. */
public enum Stage {
    ATTN_IN("attn_in", LayerStages::attnIn),
    ATTN_NORM("attn_norm", LayerStages::attnNorm),
    /** the token mixer's output (KDA or MLA after o_proj) */
    ATTN_OUT("attn_out", LayerStages::attnOut),
    PARTIAL_ATTN("partial_attn", LayerStages::partialAttn),
    /** the mixed MLP input (AttnRes over the snapshots and the partial) */
    MLP_IN("mlp_in", LayerStages::mlpIn),
    MLP_NORM("mlp_norm", LayerStages::mlpNorm),
    /** the dense MLP or LatentMoE output */
    MLP_OUT("mlp_out", LayerStages::mlpOut),
    /** the partial sum the layer returns */
    PARTIAL_OUT("partial_out", LayerStages::partialOut);

    /** Dump names of every stage, in order. */
    public static final List<String> NAMES = List.of("attn_in", "attn_norm", "attn_out", "partial_attn", "mlp_in", "mlp_norm", "mlp_out", "partial_out");
    /** The dump's name for the MoE combine weights, compared like a stage on MoE layers. */
    public static final String MOE_WEIGHT = "moe_weight";

    private final String dumpName;
    private final Function<LayerStages, float[]> get;

    Stage(String dumpName, Function<LayerStages, float[]> get) {
        this.dumpName = dumpName;
        this.get = get;
    }

    public String dumpName() {
        return dumpName;
    }

    public float[] of(LayerStages s) {
        return get.apply(s);
    }
}
