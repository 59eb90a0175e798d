package k3j.model;

import java.util.List;
import java.util.Map;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;

/** The whole model bound to a checkpoint, from headers only: model-level tensors by name, then every layer. */
public record ModelBinding(ModelConfig config, CheckpointIndex index, Map<String, TensorBinding> model, List<LayerBinding> layers) {
    public ModelBinding {
        model = Map.copyOf(model);
        layers = List.copyOf(layers);
    }

    public TensorBinding tensor(String name) {
        TensorBinding b = model.get(name);
        if (b == null) throw new IllegalStateException("no bound model-level tensor " + name);
        return b;
    }

    /** Routed experts over all MoE layers. */
    public long expertCount() {
        return layers.stream().mapToLong(l -> l.experts().size()).sum();
    }
}
