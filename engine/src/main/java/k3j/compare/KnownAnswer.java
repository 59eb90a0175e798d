package k3j.compare;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import k3j.config.ModelConfig;

/**
 * The published continuation of the released Kimi K3 for ids 1008,10484,318,15383,387 ("The capital of France
 * is"): greedy ids 17374, 20829 first — asserted — then 10,427,414,1008,606,142957, which came from an engine
 * that departs from the official MLA LoRA-norm eps, so they are reported, never asserted.
 *
 * <p>The case applies ONLY to the released model: {@link #skipReason} is empty exactly when the config has the
 * released dimensions, layer map and vocabulary and the folder holds its 96 shards; otherwise it says why the case
 * does not apply (the one case allowed to skip, with that reason visible).
 */
public final class KnownAnswer {
    public static final int[] PROMPT = {1008, 10484, 318, 15383, 387};
    public static final int[] ASSERTED = {17374, 20829};
    public static final int[] REPORTED = {10, 427, 414, 1008, 606, 142957};
    public static final int SHARDS = 96;

    private KnownAnswer() {}

    /** The released text model's layer map: MLA at one-based 4, 8, ..., 92 and 93. */
    public static String releasedLayerMap() {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < 93; i++) b.append((i + 1) % 4 == 0 || i == 92 ? 'M' : 'K');
        return b.toString();
    }

    /** Empty when {@code dir} with config {@code c} is the released Kimi K3; else every reason it is not. */
    public static List<String> skipReason(ModelConfig c, Path dir) {
        List<String> why = new ArrayList<>();
        check(why, "hidden_size", c.hiddenSize(), 7168);
        check(why, "num_hidden_layers", c.layerCount(), 93);
        check(why, "vocab_size", c.vocabSize(), 163840);
        check(why, "num_experts", c.expertCount(), 896);
        check(why, "num_experts_per_token", c.topK(), 16);
        check(why, "kda heads x head_dim", c.kdaWidth(), 96 * 128);
        check(why, "num_attention_heads", c.mlaHeads(), 96);
        check(why, "q_lora_rank", c.qLoraRank(), 1536);
        check(why, "kv_lora_rank", c.kvLoraRank(), 512);
        check(why, "routed_expert_hidden_size", c.latentSize(), 3584);
        check(why, "moe_intermediate_size", c.moeIntermediate(), 3072);
        check(why, "intermediate_size", c.denseIntermediate(), 33792);
        if (c.layerCount() == 93 && !c.layerMap().equals(releasedLayerMap())) why.add("the layer map is not the released one");
        long shards;
        try (Stream<Path> s = Files.list(dir)) {
            shards = s.filter(p -> p.getFileName().toString().matches("model-\\d{5}-of-00096\\.safetensors")).count();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot list " + dir, e);
        }
        if (shards != SHARDS) why.add(shards + " of the released " + SHARDS + " shards (model-NNNNN-of-00096.safetensors) are present");
        return why;
    }

    private static void check(List<String> why, String field, int got, int want) {
        if (got != want) why.add(field + " is " + got + ", the released model's is " + want);
    }
}
