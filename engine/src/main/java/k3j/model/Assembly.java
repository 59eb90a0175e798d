package k3j.model;

import java.nio.file.Path;
import java.util.function.Consumer;
import java.util.function.UnaryOperator;
import k3j.cache.CacheTrace;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertReader;
import k3j.cache.ExpertSource;
import k3j.cache.FileExpertReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.kernels.Mxfp4;
import k3j.kernels.Workers;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkSource;
import k3j.trunk.TrunkStream;

/**
 * The one place a runtime is put together, for {@code k3 run}, {@code k3 conform} and {@code k3 bisect} alike:
 * checkpoint index → binding (once) → {@link Model} → streamed trunk → expert cache → {@link Forward}.
 *
 * <p>The stages are separate calls so a caller can plan memory from the bound sizes ({@link #trunkBytes()},
 * {@link #expertBytes()}) before anything large is allocated, and refuse. Each later stage is optional:
 * without {@link #streamTrunk} the decoder layers are resident, without {@link #cacheExperts} the routed
 * experts are read once and kept. Closing releases what was opened, in reverse order.
 */
public final class Assembly implements AutoCloseable {

    /**
     * Seams where a caller interposes on the runtime's I/O (the tests inject read failures here; nothing
     * static): the expert cache's file reader, and the trunk source the forward binds its layers from.
     */
    public record Intercepts(UnaryOperator<ExpertReader> expertReader, UnaryOperator<TrunkSource> trunkSource) {
        public static final Intercepts NONE = new Intercepts(UnaryOperator.identity(), UnaryOperator.identity());

        public Intercepts withExpertReader(UnaryOperator<ExpertReader> r) {
            return new Intercepts(r, trunkSource);
        }

        public Intercepts withTrunkSource(UnaryOperator<TrunkSource> t) {
            return new Intercepts(expertReader, t);
        }
    }

    private final ModelBinding binding;
    private final Intercepts intercepts;
    private Model model;
    private TrunkStream stream;
    private ExpertCache cache;
    private ExpertReader cacheReader;
    private StreamedTables tables;

    private Assembly(ModelBinding binding, Intercepts intercepts) {
        this.binding = binding;
        this.intercepts = intercepts;
    }

    /**
     * Binds the first {@code layers} layers of {@code index} (all when {@code layers} < 0), from headers only.
     *
     * @throws BindException when the checkpoint does not hold what {@code config} asks for
     */
    public static Assembly bind(CheckpointIndex index, ModelConfig config, int layers, Intercepts intercepts) {
        return new Assembly(Binder.bind(index, config, layers < 0 ? config.layerCount() : layers), intercepts);
    }

    /** {@link #bind(CheckpointIndex, ModelConfig, int, Intercepts)} of the checkpoint in {@code dir}, no intercepts. */
    public static Assembly bind(Path dir, ModelConfig config, int layers) {
        return bind(CheckpointIndex.open(dir), config, layers, Intercepts.NONE);
    }

    public ModelConfig config() {
        return binding.config();
    }

    public CheckpointIndex index() {
        return binding.index();
    }

    public ModelBinding binding() {
        return binding;
    }

    /** The layers bound. */
    public int layers() {
        return binding.layers().size();
    }

    /** Bytes of the bound decoder layers' own tensors (the trunk) as stored in the checkpoint. */
    public long trunkBytes() {
        return binding.layers().stream().flatMap(l -> l.tensors().values().stream()).mapToLong(t -> t.info().length()).sum();
    }

    /** Bytes of the bound layers' routed experts as stored in the checkpoint. */
    public long expertBytes() {
        return binding.layers().stream().flatMap(l -> l.experts().stream()).mapToLong(ExpertLocation::length).sum();
    }

    /**
     * Loads the model from the binding. {@code residentLayers} false: only the model-level tables; the decoder
     * layers then come from {@link #streamTrunk}.
     */
    public Model model(boolean residentLayers) {
        if (model != null) throw new IllegalStateException("the model is already loaded");
        model = Model.of(binding, residentLayers);
        return model;
    }

    /** The loaded model (null before {@link #model(boolean)}). */
    public Model model() {
        return model;
    }

    /** Streams the decoder layers from the packed trunk in {@code dir}. */
    public TrunkStream streamTrunk(Path dir, StreamOptions options) {
        if (stream != null) throw new IllegalStateException("the trunk is already open");
        stream = TrunkStream.open(dir, binding.index(), layers(), options);
        return stream;
    }

    /** The trunk stream, or null when the layers are resident. */
    public TrunkStream trunk() {
        return stream;
    }

    /**
     * Serves the routed experts from a cache of {@code settings.budgetBytes()} whose slots hold each expert repacked
     * for the kernel (nibble codes); {@code trace} may be null.
     */
    public ExpertCache cacheExperts(ExpertCache.Settings settings, CacheTrace trace, Consumer<String> notes) throws ExpertLoadException {
        return cacheExperts(settings, Mxfp4.Codes.NIBBLES, trace, notes);
    }

    /** As {@link #cacheExperts(ExpertCache.Settings, CacheTrace, Consumer)}, the slots holding {@code codes}. */
    public ExpertCache cacheExperts(ExpertCache.Settings settings, Mxfp4.Codes codes, CacheTrace trace, Consumer<String> notes) throws ExpertLoadException {
        requireModel();
        if (cache != null) throw new IllegalStateException("the expert cache is already open");
        cacheReader = intercepts.expertReader().apply(new FileExpertReader(settings.readMode(), notes));
        cache = new ExpertCache(model.experts(), cacheReader, settings, kernelForm(codes), trace);
        return cache;
    }

    /** The kernel-ready expert form of this model's geometry. */
    public KernelExperts kernelForm(Mxfp4.Codes codes) {
        return new KernelExperts(binding.config().moeIntermediate(), binding.config().latentSize(), codes);
    }

    /** The expert cache, or null when the experts are resident. */
    public ExpertCache cache() {
        return cache;
    }

    /** Where the forward's routed experts come from: the cache, else the model's resident experts. */
    public ExpertSource experts() {
        requireModel();
        return cache != null ? cache : model.experts();
    }

    /** Reads the embedding and LM-head tables on demand through a chunk of at most {@code chunkBytes} (ultra preset). */
    public StreamedTables streamTables(long chunkBytes) {
        if (tables != null) throw new IllegalStateException("the model tables are already streamed");
        tables = StreamedTables.open(binding, chunkBytes);
        return tables;
    }

    /** The streamed model tables, or null when they are resident. */
    public StreamedTables tables() {
        return tables;
    }

    /** A forward over what was opened: streamed or resident layers, cached or resident experts, streamed or resident tables. */
    public Forward forward(Workers workers) {
        requireModel();
        Forward f = stream == null ? model.forward(workers, experts()) : model.forward(workers, experts(), intercepts.trunkSource().apply(stream));
        return tables == null ? f : f.streamingTables(tables);
    }

    private void requireModel() {
        if (model == null) throw new IllegalStateException("load the model first");
    }

    @Override
    public void close() {
        try {
            if (cache != null) cache.close();
            if (cacheReader != null) cacheReader.close();
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        } finally {
            if (tables != null) tables.close();
            if (stream != null) stream.close();
            if (model != null) model.close();
        }
    }
}
