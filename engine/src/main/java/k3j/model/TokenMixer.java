package k3j.model;

import k3j.kernels.Layers;

/** A decoder layer's attention: Kimi Delta Attention or gated MLA, with the kernel arguments bound. */
public sealed interface TokenMixer {
    record Kda(Layers.KdaWeights weights) implements TokenMixer {}

    record Mla(Layers.MlaWeights weights) implements TokenMixer {}
}
