package k3j.model;

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
        if (withLayers) for (LayerBinding l : b.layers()) layers.add(layer(c, l));
        float[] outFold = AttnRes.fold(vector(b.tensor(Binder.OUTPUT_RES_NORM)), vector(b.tensor(Binder.OUTPUT_RES_PROJ)));
        return new ModelWeights(c, matrix(b.tensor(Binder.EMBED)), layers, outFold, vector(b.tensor(Binder.FINAL_NORM)), matrix(b.tensor(Binder.LM_HEAD)));
    }

    /** Where a layer's tensors come from, by checkpoint suffix: a bound checkpoint or (gates) fixture arrays. */
    public interface LayerTensors {
        Matrix matrix(String suffix);

        /** Widened to float; the first {@code take} elements (−1 = all). */
        float[] vector(String suffix, int take);
    }

    LayerWeights layer(ModelConfig c, LayerBinding l) {
        return layer(c, l.index(), new LayerTensors() {
            @Override
            public Matrix matrix(String suffix) {
                return WeightLoader.this.matrix(l.tensor(suffix));
            }

            @Override
            public float[] vector(String suffix, int take) {
                return WeightLoader.this.vector(l.tensor(suffix));
            }
        });
    }

    /**
     * The kernel arguments of layer {@code index} from its tensors by checkpoint suffix (docs/semantics.md §2.5): the ONE
     * place that says which tensor feeds which argument.
     */
    public static LayerWeights layer(ModelConfig c, int index, LayerTensors l) {
        float eps = c.rmsNormEps();
        TokenMixer mixer;
        if (c.layerKind(index) == LayerKind.KDA) {
            mixer = new TokenMixer.Kda(new Layers.KdaWeights(
                    l.matrix("self_attn.q_proj.weight"), l.matrix("self_attn.k_proj.weight"), l.matrix("self_attn.v_proj.weight"),
                    l.matrix("self_attn.b_proj.weight"), l.matrix("self_attn.f_a_proj.weight"), l.matrix("self_attn.f_b_proj.weight"),
                    l.matrix("self_attn.g_proj.weight"), l.matrix("self_attn.o_proj.weight"),
                    l.vector("self_attn.q_conv1d.weight", -1), l.vector("self_attn.k_conv1d.weight", -1), l.vector("self_attn.v_conv1d.weight", -1),
                    l.vector("self_attn.A_log", c.kdaHeads()), l.vector("self_attn.dt_bias", -1), l.vector("self_attn.o_norm.weight", -1),
                    c.kdaHeads(), c.kdaHeadDim(), c.shortConvKernel(), c.gateLowerBound(), eps));
        } else {
            mixer = new TokenMixer.Mla(new Layers.MlaWeights(
                    l.matrix("self_attn.q_a_proj.weight"), l.vector("self_attn.q_a_layernorm.weight", -1), l.matrix("self_attn.q_b_proj.weight"),
                    l.matrix("self_attn.kv_a_proj_with_mqa.weight"), l.vector("self_attn.kv_a_layernorm.weight", -1), l.matrix("self_attn.kv_b_proj.weight"),
                    c.mlaOutputGate() ? l.matrix("self_attn.g_proj.weight") : null, l.matrix("self_attn.o_proj.weight"),
                    c.mlaHeads(), c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim()));
        }
        Mlp mlp;
        if (c.mlpKind(index) == MlpKind.DENSE) {
            mlp = new Mlp.Dense(new Layers.MlpWeights(l.matrix("mlp.gate_proj.weight"), l.matrix("mlp.up_proj.weight"), l.matrix("mlp.down_proj.weight"),
                    c.situBeta(), c.situLinearBeta()));
        } else {
            String s = "block_sparse_moe.";
            mlp = new Mlp.LatentMoe(l.matrix(s + "gate.weight"), l.vector(s + "gate.e_score_correction_bias", -1),
                    l.matrix(s + "routed_expert_down_proj.weight"), l.matrix(s + "routed_expert_up_proj.weight"), l.vector(s + "routed_expert_norm.weight", -1),
                    new Layers.MlpWeights(l.matrix(s + "shared_experts.gate_proj.weight"), l.matrix(s + "shared_experts.up_proj.weight"),
                            l.matrix(s + "shared_experts.down_proj.weight"), c.situBeta(), c.situLinearBeta()),
                    c.expertCount(), c.topK(), c.latentSize(), c.moeIntermediate(), c.moeRenormalize(), c.latentNorm(),
                    c.routedScalingFactor(), eps, c.situBeta(), c.situLinearBeta());
        }
        return new LayerWeights(index, c.isAttnResBoundary(index), l.vector("input_layernorm.weight", -1), l.vector("post_attention_layernorm.weight", -1),
                AttnRes.fold(l.vector("self_attention_res_norm.weight", -1), l.vector("self_attention_res_proj.weight", -1)),
                AttnRes.fold(l.vector("mlp_res_norm.weight", -1), l.vector("mlp_res_proj.weight", -1)), mixer, mlp);
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
