package k3j.model;

import java.util.List;

/**
 * Where the forward gets each decoder layer's weights, one layer at a time in walk order: resident (bound
 * once at load) or bound per use from a streamed trunk ({@link StreamedLayers}). A {@link Held} layer's
 * weights are valid until it is closed; the forward closes it as soon as the layer is computed.
 */
public interface LayerSource {
    int layerCount();

    /** Layer {@code layer}'s weights; a failed read or bind is a {@link ForwardException} (the run exits 1). */
    Held acquire(int layer);

    /** One layer's weights, held until {@link #close}. */
    interface Held extends AutoCloseable {
        LayerWeights weights();

        @Override
        void close();
    }

    /** Layers bound once and kept: acquire hands them out, close does nothing. */
    static LayerSource resident(List<LayerWeights> layers) {
        List<LayerWeights> l = List.copyOf(layers);
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
        };
    }
}
