package k3j.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The model's hyperparameters as {@link ConfigReader} read them (docs/semantics.md §1.3, §1.4), and the
 * constants the engine derives from them (§1.4, §1.6). Real K3 values in the comments.
 *
 * @param source             where the config came from (a path, or the name given to an embedded config)
 * @param shape              NESTED (released config.json) or FLAT (test fixtures)
 * @param fullAttnLayers     the MLA layers, ONE-based exactly as given (K3: 4, 8, ..., 88, 92, 93)
 * @param declaresMxfp4      quantization_config is present (its group size was checked to be 32)
 * @param defaulted          the JSON keys that were absent and took their documented default (only booleans can)
 * @param maxPositions       max_position_embeddings (0 = not stated): a request needing more positions is refused
 * @param ignored            keys present that neither drive the engine nor are validated (listed in the summary, never silent)
 */
public record ModelConfig(
        String source,
        Shape shape,
        int hiddenSize,            // residual width E (7168)
        int layerCount,            // decoder layers L (93)
        int vocabSize,             // vocabulary V (163840)
        float rmsNormEps,          // RMSNorm epsilon of the residual-stream norms (1e-5)
        int kdaHeads,              // KDA heads H (96)
        int kdaHeadDim,            // KDA head dim D, d_k = d_v (128)
        int shortConvKernel,       // causal depthwise conv taps (4)
        float gateLowerBound,      // KDA decay lower bound lb (-5)
        int mlaHeads,              // MLA heads Hm (96)
        int qLoraRank,             // MLA query low rank (1536)
        int kvLoraRank,            // MLA KV latent (512)
        int qkNopeHeadDim,         // qn (128)
        int qkRopeHeadDim,         // qr (64): present in every head, never rotated (NoPE)
        int vHeadDim,              // vh (128)
        boolean mlaOutputGate,     // sigmoid output gate on MLA (true)
        int expertCount,           // routed experts per MoE layer (896)
        int topK,                  // experts selected per token K (16)
        int sharedExpertCount,     // shared experts, fused into one MLP (2)
        int latentSize,            // routed_expert_hidden_size: LatentMoE width Lt (3584)
        int moeIntermediate,       // routed expert intermediate I (3072)
        float routedScalingFactor, // multiplier on the routed weights (1.0)
        boolean moeRenormalize,    // renormalise the top-k weights (true)
        boolean latentNorm,        // RMSNorm on the weighted latent aggregate (true)
        int firstDenseLayers,      // first_k_dense_replace: layers below it are dense (1)
        int moeLayerFreq,          // moe_layer_freq: MoE only where l % freq == 0 (1)
        int denseIntermediate,     // dense MLP intermediate (33792)
        int attnResBlockSize,      // AttnRes block size (12)
        float situBeta,            // SiTU gate cap beta1 (4)
        float situLinearBeta,      // SiTU linear cap beta2 (25)
        List<Integer> fullAttnLayers,
        boolean declaresMxfp4,
        List<String> defaulted,
        int maxPositions,          // max_position_embeddings, 0 when the config does not state it
        List<String> ignored) {

    /** The most experts a token may select (docs/semantics.md §1.5, K3_MAX_TOPK); per-token scratch is sized by it. */
    public static final int MAX_TOP_K = 64;
    /** MXFP4 scale group: one E8M0 exponent per 32 consecutive inputs (docs/semantics.md §1.6, §3.4). */
    public static final int MXFP4_GROUP_SIZE = 32;
    /**
     * Upper bounds on the typed sizes, far above the released K3 (93 layers, hidden 7168, vocab 163840, 896
     * experts, 96 heads of 128, ranks 1536/512, intermediate 33792): a config past them is refused before any
     * of them sizes an allocation or a loop (num_hidden_layers = 2^31 - 1 would otherwise fill the heap).
     */
    public static final int MAX_LAYERS = 1024, MAX_WIDTH = 1 << 16, MAX_VOCAB = 1 << 22, MAX_EXPERTS = 1 << 16, MAX_HEADS = 1 << 12,
            MAX_INTERMEDIATE = 1 << 20, MAX_CONV_KERNEL = 64, MAX_SHARED_EXPERTS = 64;
    /** Bounds on the typed scalars: a scaling factor, SiTU caps and the decay bound past these describe no trained model. */
    public static final float MAX_SCALE = 1e4f;

    public enum Shape { NESTED, FLAT }

    public ModelConfig {
        Objects.requireNonNull(source);
        Objects.requireNonNull(shape);
        fullAttnLayers = List.copyOf(fullAttnLayers);
        defaulted = List.copyOf(defaulted);
        ignored = List.copyOf(ignored);
    }

    // ----------------------------------------------------------------------------------------------
    // layer map

    /** KDA or MLA for zero-based layer l. Pitfall (docs/semantics.md §11.1): the list is ONE-based, so test l+1. */
    public LayerKind layerKind(int layer) {
        Objects.checkIndex(layer, layerCount);
        return fullAttnLayers.contains(layer + 1) ? LayerKind.MLA : LayerKind.KDA;
    }

    /** DENSE or MOE for zero-based layer l (docs/semantics.md §1.4: MoE iff l >= first_k_dense_replace and l % moe_layer_freq == 0). */
    public MlpKind mlpKind(int layer) {
        Objects.checkIndex(layer, layerCount);
        return layer >= firstDenseLayers && layer % moeLayerFreq == 0 ? MlpKind.MOE : MlpKind.DENSE;
    }

    /** One letter per layer, K or M, e.g. {@code KKKMKKKMKKKMM} for the tiny oracle. */
    public String layerMap() {
        var sb = new StringBuilder(layerCount);
        for (int l = 0; l < layerCount; l++) sb.append(layerKind(l).letter);
        return sb.toString();
    }

    public int mlaLayerCount() {
        return fullAttnLayers.size();
    }

    public int kdaLayerCount() {
        return layerCount - fullAttnLayers.size();
    }

    public int moeLayerCount() {
        int n = 0;
        for (int l = 0; l < layerCount; l++) if (mlpKind(l) == MlpKind.MOE) n++;
        return n;
    }

    // ----------------------------------------------------------------------------------------------
    // Attention Residuals

    /** A block boundary: the layer snapshots its input before attention (K3: 0, 12, ..., 84). */
    public boolean isAttnResBoundary(int layer) {
        Objects.checkIndex(layer, layerCount);
        return layer % attnResBlockSize == 0;
    }

    /** The zero-based boundary layers, in order. */
    public List<Integer> attnResBoundaries() {
        var out = new ArrayList<Integer>();
        for (int l = 0; l < layerCount; l += attnResBlockSize) out.add(l);
        return List.copyOf(out);
    }

    /** Snapshot slots per token: floor(L / block) + 2 (docs/semantics.md §1.6; K3: 93/12 + 2 = 9). */
    public int snapshotCapacity() {
        return layerCount / attnResBlockSize + 2;
    }

    // ----------------------------------------------------------------------------------------------
    // derived widths (the notation of docs/semantics.md)

    /** P = H·D: width of the KDA q, k, v, gate and output projections. */
    public int kdaWidth() {
        return kdaHeads * kdaHeadDim;
    }

    /** qh = qn + qr: one MLA query/key head; the softmax scale is qh^-0.5 (docs/semantics.md §11.4). */
    public int mlaQkHeadDim() {
        return qkNopeHeadDim + qkRopeHeadDim;
    }

    /** kvd = qn + vh: one head's slice of kv_b_proj's output. */
    public int mlaKvHeadDim() {
        return qkNopeHeadDim + vHeadDim;
    }

    /** kvw = kv_lora + qr: width of kv_a_proj_with_mqa's output (the latent plus the shared rope key). */
    public int mlaKvAWidth() {
        return kvLoraRank + qkRopeHeadDim;
    }

    /** SI = I · shared count: the fused shared-expert intermediate width (K3: 6144). */
    public int sharedIntermediate() {
        return moeIntermediate * sharedExpertCount;
    }

    // ----------------------------------------------------------------------------------------------

    /** The one line the k3 command prints on success (docs/semantics.md §1.5 step 4), plus the defaults taken, if any. */
    public String summary() {
        String line = "config: %s (%s shape) | hidden=%d layers=%d vocab=%d | %d MLA + %d KDA | experts %d top %d shared %d | latent=%d"
                .formatted(source, shape == Shape.NESTED ? "nested" : "flat", hiddenSize, layerCount, vocabSize,
                        mlaLayerCount(), kdaLayerCount(), expertCount, topK, sharedExpertCount, latentSize);
        if (!defaulted.isEmpty()) line += " | defaulted: " + String.join(", ", defaulted);
        if (!ignored.isEmpty()) line += " | not read: " + String.join(", ", ignored);
        return line;
    }
}
