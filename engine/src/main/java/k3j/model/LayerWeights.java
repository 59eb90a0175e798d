package k3j.model;

/**
 * One decoder layer's weights. The AttnRes norm gain and scoring vector are kept folded
 * (fold = norm ⊙ proj, float, docs/semantics.md §3.15), which is all the kernel reads.
 */
public record LayerWeights(int index, boolean boundary, float[] inputNorm, float[] postAttentionNorm,
        float[] attnResFold, float[] mlpResFold, TokenMixer mixer, Mlp mlp) {}
