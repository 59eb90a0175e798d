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

    private final boolean residentLayers;

    private Model(ModelBinding binding, boolean residentLayers) {
        this.config = binding.config();
        this.index = binding.index();
        this.residentLayers = residentLayers;
        this.binding = binding;
        this.weights = new WeightLoader(reader, arena).load(binding, residentLayers);
        this.experts = new CheckpointExperts(binding, reader);
    }

    /** config.json of the directory, every layer. */
    public static Model open(Path dir) {
        return open(dir, ConfigReader.read(dir.resolve("config.json")), -1);
    }

    /** {@code layers} < 0 binds all of them. */
    public static Model open(Path dir, ModelConfig config, int layers) {
        return open(CheckpointIndex.open(dir), config, layers);
    }

    /** An index already opened (the CLI times and reports it); {@code layers} < 0 binds all of them. */
    public static Model open(CheckpointIndex index, ModelConfig config, int layers) {
        return open(index, config, layers, true);
    }

    /**
     * {@code residentLayers} false: only the model-level tables are loaded; the decoder layers must come from a
     * streamed trunk ({@link #forward(Workers, k3j.cache.ExpertSource, k3j.trunk.TrunkSource)}).
     */
    public static Model open(CheckpointIndex index, ModelConfig config, int layers, boolean residentLayers) {
        return of(Binder.bind(index, config, layers < 0 ? config.layerCount() : layers), residentLayers);
    }

    /** A binding already made (see {@link Assembly}: a checkpoint is bound once). */
    public static Model of(ModelBinding binding, boolean residentLayers) {
        return new Model(binding, residentLayers);
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

    /** A forward with the experts resident from the checkpoint (tiny models; every expert read once, kept). */
    public Forward forward(Workers workers) {
        return forward(workers, experts);
    }

    /**
     * A forward whose routed experts come from {@code source}, e.g. an {@link k3j.cache.ExpertCache} opened over
     * {@link #experts()} as its locator (the real model: 82,432 experts do not stay resident).
     */
    public Forward forward(Workers workers, k3j.cache.ExpertSource source) {
        if (!residentLayers) throw new IllegalStateException("this model was opened without resident layers: give the trunk they stream from");
        return new Forward(weights, source, workers, source == experts);
    }

    /** A forward whose decoder layers are bound per use from {@code trunk} (docs/semantics.md §5.5) and whose experts come from {@code source}. */
    public Forward forward(Workers workers, k3j.cache.ExpertSource source, k3j.trunk.TrunkSource trunk) {
        return new Forward(weights, new StreamedLayers(binding, trunk), source, workers, source == experts);
    }

    @Override
    public void close() {
        experts.close();
        reader.close();
        arena.close();
    }
}
