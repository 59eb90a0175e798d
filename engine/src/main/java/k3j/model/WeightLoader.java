package k3j.model;

import static k3j.model.LayerTensor.*;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import k3j.config.LayerKind;
import k3j.config.MlpKind;
import k3j.config.ModelConfig;
import k3j.io.DType;
import k3j.io.TensorReader;
import k3j.kernels.AttnRes;
import k3j.kernels.Layers;
import k3j.kernels.Matrix;
import k3j.kernels.WeightType;

/**
 * Turns a {@link ModelBinding} into kernel arguments. BF16 and F32 matrices are mapped read-only in place
 * (the kernels read them from the mapping); F16 matrices are widened to F32; vectors are widened to float
 * (A_log: only the first {@code heads} entries of the padded tensor are kept).
 */
public final class WeightLoader {
    private final TensorReader reader;
    private final Arena arena;

    public WeightLoader(TensorReader reader, Arena arena) {
        this.reader = reader;
        this.arena = arena;
    }

    public ModelWeights load(ModelBinding b) {
        return load(b, true);
    }

    /** {@code withLayers} false: the model-level tables only (the decoder layers are streamed from a trunk). */
    public ModelWeights load(ModelBinding b, boolean withLayers) {
        ModelConfig c = b.config();
        List<LayerWeights> layers = new ArrayList<>();
        List<LayerTensors> tensors = new ArrayList<>();
        if (withLayers) {
            for (LayerBinding l : b.layers()) {
                LayerTensors t = bound(l);
                tensors.add(t);
                layers.add(layer(c, l.index(), t));
            }
        }
        float[] outFold = AttnRes.fold(vector(b.tensor(Binder.OUTPUT_RES_NORM)), vector(b.tensor(Binder.OUTPUT_RES_PROJ)));
        return new ModelWeights(c, matrix(b.tensor(Binder.EMBED)), layers, outFold, vector(b.tensor(Binder.FINAL_NORM)), matrix(b.tensor(Binder.LM_HEAD)),
                tensors);
    }

    /** Where a layer's tensors come from, by checkpoint suffix: a bound checkpoint or (gates) fixture arrays. */
    public interface LayerTensors {
        Matrix matrix(String suffix);

        /** Widened to float; the first {@code take} elements (−1 = all). */
        float[] vector(String suffix, int take);

        default Matrix matrix(LayerTensor t) {
            return matrix(t.suffix());
        }

        default float[] vector(LayerTensor t, int take) {
            return vector(t.suffix(), take);
        }

        default float[] vector(LayerTensor t) {
            return vector(t.suffix(), -1);
        }
    }

    /** A LatentMoE layer's hyperparameters: the config's, or those a kernel fixture states. */
    public record MoeParams(int experts, int topK, int latent, int intermediate, boolean renormalize, boolean latentNorm, float scaling,
                            float rmsEps, float beta, float linearBeta) {
        public static MoeParams of(ModelConfig c) {
            return new MoeParams(c.expertCount(), c.topK(), c.latentSize(), c.moeIntermediate(), c.moeRenormalize(), c.latentNorm(),
                    c.routedScalingFactor(), c.rmsNormEps(), c.situBeta(), c.situLinearBeta());
        }
    }

    /**
     * A layer's tensors mapped (or widened) on first use and kept: binding the layer again through them (a rename,
     * bisect's candidates) hands out the same matrices and vectors, never a second mapping.
     */
    private LayerTensors bound(LayerBinding l) {
        java.util.Map<String, Matrix> matrices = new java.util.concurrent.ConcurrentHashMap<>();
        java.util.Map<String, float[]> vectors = new java.util.concurrent.ConcurrentHashMap<>();
        return new LayerTensors() {
            @Override
            public Matrix matrix(String suffix) {
                return matrices.computeIfAbsent(suffix, s -> WeightLoader.this.matrix(l.tensor(s)));
            }

            @Override
            public float[] vector(String suffix, int take) {
                return vectors.computeIfAbsent(suffix, s -> WeightLoader.this.vector(l.tensor(s)));
            }
        };
    }

    /**
     * The kernel arguments of layer {@code index} from its tensors ({@link LayerTensor}, docs/semantics.md §2.5):
     * with {@link #kda}, {@link #mla}, {@link #dense} and {@link #latentMoe}, the ONE place that says which
     * tensor feeds which argument.
     */
    public static LayerWeights layer(ModelConfig c, int index, LayerTensors l) {
        float eps = c.rmsNormEps();
        TokenMixer mixer = c.layerKind(index) == LayerKind.KDA
                ? new TokenMixer.Kda(kda(l, c.kdaHeads(), c.kdaHeadDim(), c.shortConvKernel(), c.gateLowerBound(), eps))
                : new TokenMixer.Mla(mla(l, c.mlaHeads(), c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim(), c.mlaOutputGate()));
        Mlp mlp = c.mlpKind(index) == MlpKind.DENSE ? new Mlp.Dense(dense(l, c.situBeta(), c.situLinearBeta())) : latentMoe(l, MoeParams.of(c));
        return new LayerWeights(index, c.isAttnResBoundary(index), l.vector(INPUT_NORM), l.vector(POST_ATTENTION_NORM),
                AttnRes.fold(l.vector(ATTN_RES_NORM), l.vector(ATTN_RES_PROJ)), AttnRes.fold(l.vector(MLP_RES_NORM), l.vector(MLP_RES_PROJ)), mixer, mlp);
    }

    /** A KDA token mixer; A_log keeps its first {@code heads} entries. */
    public static Layers.KdaWeights kda(LayerTensors l, int heads, int headDim, int convKernel, float lowerBound, float eps) {
        return new Layers.KdaWeights(l.matrix(KDA_Q), l.matrix(KDA_K), l.matrix(KDA_V), l.matrix(KDA_B), l.matrix(KDA_F_A), l.matrix(KDA_F_B),
                l.matrix(KDA_G), l.matrix(KDA_O), l.vector(KDA_Q_CONV), l.vector(KDA_K_CONV), l.vector(KDA_V_CONV),
                l.vector(KDA_A_LOG, heads), l.vector(KDA_DT_BIAS), l.vector(KDA_O_NORM), heads, headDim, convKernel, lowerBound, eps);
    }

    /** A gated MLA token mixer ({@code outputGate} false: no g_proj). */
    public static Layers.MlaWeights mla(LayerTensors l, int heads, int nope, int rope, int value, boolean outputGate) {
        return new Layers.MlaWeights(l.matrix(MLA_Q_A), l.vector(MLA_Q_A_NORM), l.matrix(MLA_Q_B), l.matrix(MLA_KV_A), l.vector(MLA_KV_A_NORM),
                l.matrix(MLA_KV_B), outputGate ? l.matrix(MLA_G) : null, l.matrix(MLA_O), heads, nope, rope, value);
    }

    /** The dense SiTU MLP. */
    public static Layers.MlpWeights dense(LayerTensors l, float beta, float linearBeta) {
        return new Layers.MlpWeights(l.matrix(DENSE_GATE), l.matrix(DENSE_UP), l.matrix(DENSE_DOWN), beta, linearBeta);
    }

    /** Stable LatentMoE without its routed experts (those come from an {@link k3j.cache.ExpertSource}). */
    public static Mlp.LatentMoe latentMoe(LayerTensors l, MoeParams p) {
        return new Mlp.LatentMoe(l.matrix(MOE_ROUTER), l.vector(MOE_ROUTER_BIAS), l.matrix(MOE_LATENT_DOWN), l.matrix(MOE_LATENT_UP),
                l.vector(MOE_LATENT_NORM), new Layers.MlpWeights(l.matrix(MOE_SHARED_GATE), l.matrix(MOE_SHARED_UP), l.matrix(MOE_SHARED_DOWN),
                        p.beta(), p.linearBeta()),
                p.experts(), p.topK(), p.latent(), p.intermediate(), p.renormalize(), p.latentNorm(), p.scaling(), p.rmsEps(), p.beta(), p.linearBeta());
    }

    /** BF16 / F32 mapped in place; F16 widened to an F32 matrix (the binder refused every other dtype). */
    public Matrix matrix(TensorBinding t) {
        if (t.storage() != Storage.MATRIX) throw new IllegalStateException(t.name() + " is bound as " + t.storage() + ", not a matrix");
        int rows = Math.toIntExact(t.info().shape()[0]), cols = Math.toIntExact(t.info().shape()[1]);
        DType d = t.info().dtype();
        if (d == DType.F16) return Matrix.f32(reader.readFloats(t.info()), rows, cols);
        MemorySegment seg = reader.map(t.info(), arena);
        return new Matrix(seg, d == DType.BF16 ? WeightType.BF16 : WeightType.F32, rows, cols);
    }

    /** Widened to float, the first {@code take} elements. */
    public float[] vector(TensorBinding t) {
        if (t.storage() != Storage.VECTOR) throw new IllegalStateException(t.name() + " is bound as " + t.storage() + ", not a vector");
        float[] f = reader.readFloats(t.info());
        return f.length == t.take() ? f : java.util.Arrays.copyOf(f, Math.toIntExact(t.take()));
    }
}
