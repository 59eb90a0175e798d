package k3j.model;

import java.util.List;
import k3j.config.ModelConfig;
import k3j.kernels.Matrix;

/** The bound model: embedding, layers, the model-level AttnRes fold, final norm and the untied LM head. */
public record ModelWeights(ModelConfig config, Matrix embed, List<LayerWeights> layers, float[] outputResFold, float[] finalNorm, Matrix lmHead) {
    public ModelWeights {
        layers = List.copyOf(layers);
    }
}
