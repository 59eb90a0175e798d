package k3j.model;

import java.util.List;
import java.util.function.UnaryOperator;
import k3j.config.ModelConfig;

/**
 * Where the forward gets each decoder layer's weights, one layer at a time in walk order: resident (bound
 * once at load) or bound per use from a streamed trunk ({@link StreamedLayers}). A {@link Held} layer's
 * weights are valid until it is closed; the forward closes it as soon as the layer is computed.
 */
public interface LayerSource {
    int layerCount();

    /** Layer {@code layer}'s weights; a failed read or bind is a {@link ForwardException} (the run exits 1). */
    Held acquire(int layer);

    /**
     * Layer {@code layer} bound again from the bytes this source already holds for it (the resident mapping, or
     * the trunk slot it streams into), its tensors by suffix seen through {@code rewrite}: a view that renames
     * two tensors or reads one as stored transposed (bisect's candidates). No second copy of the layer is made,
     * so a candidate runs within the memory the source is planned for.
     */
    Held acquire(int layer, UnaryOperator<WeightLoader.LayerTensors> rewrite);

    /** One layer's weights, held until {@link #close}. */
    interface Held extends AutoCloseable {
        LayerWeights weights();

        @Override
        void close();
    }

    /**
     * Layers bound once and kept: acquire hands them out, close does nothing; {@code tensors} are each layer's
     * tensors as bound (the same mapped matrices and vectors), which a rewritten acquire binds again.
     */
    static LayerSource resident(ModelConfig config, List<LayerWeights> layers, List<WeightLoader.LayerTensors> tensors) {
        List<LayerWeights> l = List.copyOf(layers);
        List<WeightLoader.LayerTensors> t = List.copyOf(tensors);
        return new LayerSource() {
            @Override
            public int layerCount() {
                return l.size();
            }

            @Override
            public Held acquire(int layer) {
                LayerWeights w = l.get(layer);
                return new Held() {
                    @Override
                    public LayerWeights weights() {
                        return w;
                    }

                    @Override
                    public void close() {}
                };
            }

            @Override
            public Held acquire(int layer, UnaryOperator<WeightLoader.LayerTensors> rewrite) {
                if (t.size() != l.size()) throw new IllegalStateException("these resident layers were given without their tensors: nothing to bind again");
                LayerWeights w = WeightLoader.layer(config, l.get(layer).index(), rewrite.apply(t.get(layer)));
                return new Held() {
                    @Override
                    public LayerWeights weights() {
                        return w;
                    }

                    @Override
                    public void close() {}
                };
            }
        };
    }
}
