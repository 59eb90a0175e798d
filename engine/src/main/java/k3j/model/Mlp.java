package k3j.model;

import k3j.kernels.Layers;
import k3j.kernels.Matrix;

/** A decoder layer's feed-forward: the dense SiTU MLP (layer 0) or Stable LatentMoE (routed experts come from an ExpertSource). */
public sealed interface Mlp {
    record Dense(Layers.MlpWeights weights) implements Mlp {}

    /**
     * Everything of a LatentMoE layer except the routed experts. gate [N][E] is the router (kept as the
     * checkpoint stores it), bias the e_score_correction_bias, down [Lt][E], up [E][Lt], norm [Lt].
     */
    record LatentMoe(Matrix gate, float[] bias, Matrix down, Matrix up, float[] norm, Layers.MlpWeights shared,
            int experts, int topK, int latent, int intermediate, boolean renormalize, boolean latentNorm, float scaling,
            float rmsEps, float beta, float linearBeta) implements Mlp {}
}
