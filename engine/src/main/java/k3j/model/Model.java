package k3j.model;

import java.lang.foreign.Arena;
import java.nio.file.Path;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.io.TensorReader;
import k3j.kernels.Workers;

/**
 * A model directory opened for inference: config → checkpoint index → binding → weights, with the routed
 * experts resident from the checkpoint. Closing unmaps everything.
 */
public final class Model implements AutoCloseable {
    private final ModelConfig config;
    private final CheckpointIndex index;
    private final ModelBinding binding;
    private final TensorReader reader = new TensorReader();
    private final Arena arena = Arena.ofShared();
    private final ModelWeights weights;
    private final CheckpointExperts experts;

    private Model(ModelConfig config, CheckpointIndex index, int layers) {
        this.config = config;
        this.index = index;
        this.binding = Binder.bind(index, config, layers);
        this.weights = new WeightLoader(reader, arena).load(binding);
        this.experts = new CheckpointExperts(binding, reader);
    }

    /** config.json of the directory, every layer. */
    public static Model open(Path dir) {
        return open(dir, ConfigReader.read(dir.resolve("config.json")), -1);
    }

    /** {@code layers} < 0 binds all of them. */
    public static Model open(Path dir, ModelConfig config, int layers) {
        CheckpointIndex index = CheckpointIndex.open(dir);
        return new Model(config, index, layers < 0 ? config.layerCount() : layers);
    }

    public ModelConfig config() {
        return config;
    }

    public CheckpointIndex index() {
        return index;
    }

    public ModelBinding binding() {
        return binding;
    }

    public ModelWeights weights() {
        return weights;
    }

    public CheckpointExperts experts() {
        return experts;
    }

    public Forward forward(Workers workers) {
        return new Forward(weights, experts, workers);
    }

    @Override
    public void close() {
        experts.close();
        reader.close();
        arena.close();
    }
}
