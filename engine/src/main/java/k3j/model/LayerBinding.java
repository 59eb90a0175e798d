package k3j.model;

import java.util.List;
import java.util.Map;
import k3j.cache.ExpertLocation;
import k3j.config.LayerKind;
import k3j.config.MlpKind;

/**
 * Every tensor of one decoder layer, bound by checkpoint suffix (the part after
 * {@code language_model.model.layers.<L>.}); routed experts as header locations, one per expert id.
 */
public record LayerBinding(int index, LayerKind mixer, MlpKind mlp, Map<String, TensorBinding> tensors, List<ExpertLocation> experts) {
    public LayerBinding {
        tensors = Map.copyOf(tensors);
        experts = List.copyOf(experts);
    }

    public TensorBinding tensor(String suffix) {
        TensorBinding b = tensors.get(suffix);
        if (b == null) throw new IllegalStateException("layer " + index + " has no bound tensor " + suffix);
        return b;
    }

    public boolean has(String suffix) {
        return tensors.containsKey(suffix);
    }
}
