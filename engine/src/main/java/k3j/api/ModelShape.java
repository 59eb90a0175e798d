package k3j.api;

import k3j.config.ModelConfig;

/**
 * The widths of an opened model, from its config.json.
 *
 * @param layers       decoder layers bound (all of the config's, or fewer when the engine was opened with fewer)
 * @param hiddenSize   the residual stream's width
 * @param vocabSize    the vocabulary: the length of each row of logits
 * @param experts      routed experts per MoE layer
 * @param topK         routed experts chosen per token
 * @param maxPositions the config's max_position_embeddings, 0 when it does not state one
 */
public record ModelShape(int layers, int hiddenSize, int vocabSize, int experts, int topK, int maxPositions) {
    static ModelShape of(ModelConfig c, int layers) {
        return new ModelShape(layers, c.hiddenSize(), c.vocabSize(), c.expertCount(), c.topK(), c.maxPositions());
    }
}
