package k3j.config;

/** The feed-forward a decoder layer runs (docs/semantics.md §1.4): MoE iff l >= first_k_dense_replace and l % moe_layer_freq == 0. */
public enum MlpKind {
    /** A dense SiTU-GLU MLP of width intermediate_size (only layer 0 in K3). */
    DENSE,
    /** Stable LatentMoE: routed MXFP4 experts in the latent width plus fused shared experts. */
    MOE
}
