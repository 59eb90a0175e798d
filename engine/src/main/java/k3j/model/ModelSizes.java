package k3j.model;

import java.nio.file.Path;
import k3j.cache.ExpertLocation;
import k3j.config.ConfigReader;
import k3j.config.MlpKind;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;

/**
 * A model's own sizes, from its config and shard headers alone (no weight is read): what one routed expert
 * takes, how many there are, how many a token asks for, and how the weights split into routed experts and the
 * rest (trunk and model tables). The commands that size something (the plan, {@code sim-cache}, {@code doctor})
 * take these instead of the released model's figures; {@link #RELEASED} is those figures, for when no model is
 * given, and says so by its name.
 *
 * @param name              where the sizes come from (the model folder, or "the released Kimi K3")
 * @param expertBytes       one routed expert: its six MXFP4 tensors
 * @param moeLayers         layers with a routed MoE
 * @param expertsPerLayer   routed experts per MoE layer
 * @param topK              experts a token selects per MoE layer
 * @param weightBytes       every tensor of the text model
 * @param routedExpertBytes every routed expert of every layer
 */
public record ModelSizes(String name, long expertBytes, int moeLayers, int expertsPerLayer, int topK, long weightBytes,
                         long routedExpertBytes) {

    /** The released Kimi K3: 92 MoE layers of 896 experts of 17,547,264 bytes, top-16; 1.56 TB of text-model weights. */
    public static final ModelSizes RELEASED = new ModelSizes("the released Kimi K3", 17_547_264L, 92, 896, 16,
            1_559_945_240_320L, 92L * 896 * 17_547_264L);

    /** The sizes of the model in {@code dir} (its config.json and shard headers). */
    public static ModelSizes of(Path dir) {
        ModelConfig cfg = ConfigReader.read(dir.resolve("config.json"));
        CheckpointIndex index = CheckpointIndex.open(dir);
        ModelBinding b = Binder.bind(index, cfg);
        long weights = 0, routed = 0, one = 0;
        int moe = 0;
        for (TensorInfo t : index.tensors()) weights += t.length();
        for (LayerBinding l : b.layers()) {
            if (l.mlp() != MlpKind.MOE) continue;
            moe++;
            for (ExpertLocation e : l.experts()) routed += e.length();
            if (one == 0 && !l.experts().isEmpty()) one = l.experts().getFirst().length();
        }
        return new ModelSizes(dir.toString(), one, moe, cfg.expertCount(), cfg.topK(), weights, routed);
    }

    /** Every routed expert of the model: the pool an expert cache draws from. */
    public long poolExperts() {
        return (long) moeLayers * expertsPerLayer;
    }

    /** Expert requests one decoded token makes: one per MoE layer and pick. */
    public long requestsPerToken() {
        return (long) moeLayers * topK;
    }

    /** Weights that are not routed experts: the trunk and the model tables. */
    public long residentBytes() {
        return weightBytes - routedExpertBytes;
    }
}
