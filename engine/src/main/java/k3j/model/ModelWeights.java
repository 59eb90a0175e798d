package k3j.model;

import java.util.List;
import k3j.config.ModelConfig;
import k3j.kernels.Matrix;

/**
 * The bound model: embedding, layers, the model-level AttnRes fold, final norm and the untied LM head; with each
 * resident layer's tensors by suffix as bound ({@code layerTensors}: the same objects the layers hold, empty when
 * the layers were not bound from a checkpoint), which bisect binds again through a rename or transpose.
 */
public record ModelWeights(ModelConfig config, Matrix embed, List<LayerWeights> layers, float[] outputResFold, float[] finalNorm, Matrix lmHead,
                           List<WeightLoader.LayerTensors> layerTensors) {
    public ModelWeights {
        layers = List.copyOf(layers);
        layerTensors = List.copyOf(layerTensors);
    }

    public ModelWeights(ModelConfig config, Matrix embed, List<LayerWeights> layers, float[] outputResFold, float[] finalNorm, Matrix lmHead) {
        this(config, embed, layers, outputResFold, finalNorm, lmHead, List.of());
    }
}
