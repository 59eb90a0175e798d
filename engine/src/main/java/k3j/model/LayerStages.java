package k3j.model;

import java.util.List;
import k3j.kernels.Layers;

/**
 * Every stage of one decoder layer over T tokens ([T][E] row-major unless noted), in the order computed
 * (docs/semantics.md §4.1, docs/formats.md §7.2.2): the incoming partial sum, the mixed attention input, its
 * norm, the token mixer's output, the partial after attention, the mixed MLP input, its norm, the MLP or
 * MoE output and the returned partial. MoE layers add routing [T][K] in selection order; KDA layers the
 * state after the call. snapshotsOut is the snapshot list after the layer (one more on a boundary).
 */
public record LayerStages(int layer, int tokens, float[] partialIn, float[] attnIn, float[] attnNorm, float[] attnOut,
        float[] partialAttn, float[] mlpIn, float[] mlpNorm, float[] mlpOut, float[] partialOut,
        int[] moeIdx, float[] moeWeight, Layers.KdaState kdaState, List<float[]> snapshotsOut) {}
