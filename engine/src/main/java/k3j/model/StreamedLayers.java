package k3j.model;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.function.UnaryOperator;
import k3j.config.ModelConfig;
import k3j.io.DType;
import k3j.io.Widen;
import k3j.kernels.Matrix;
import k3j.kernels.WeightType;
import k3j.trunk.LayerBytes;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkSource;

/**
 * Decoder layers bound per use from a packed, streamed trunk (docs/semantics.md §5.5): acquire layer L from the
 * {@link TrunkSource} (which reads ahead L+1 while L computes), bind every tensor the binding names from the
 * run's bytes (BF16 / F32 matrices used in place, F16 widened, vectors widened), and release the run when
 * the forward is done with the layer. The trunk holds the checkpoint's bytes verbatim, so the weights, and
 * with the same kernels in the same order the logits, are bit-identical to the resident run.
 *
 * <p>Each tensor's dtype, shape and byte length in the trunk are checked against the checkpoint's binding:
 * a trunk that does not match is a failed bind, never a silent reinterpretation.
 */
public final class StreamedLayers implements LayerSource {
    private final ModelBinding binding;
    private final TrunkSource trunk;

    public StreamedLayers(ModelBinding binding, TrunkSource trunk) {
        if (trunk.layerCount() < binding.layers().size()) {
            throw new IllegalArgumentException("the trunk walks " + trunk.layerCount() + " layers, the binding has " + binding.layers().size());
        }
        this.binding = binding;
        this.trunk = trunk;
    }

    @Override
    public int layerCount() {
        return binding.layers().size();
    }

    @Override
    public Held acquire(int layer) {
        return acquire(layer, UnaryOperator.identity());
    }

    @Override
    public Held acquire(int layer, UnaryOperator<WeightLoader.LayerTensors> rewrite) {
        LayerBytes bytes;
        try {
            bytes = trunk.acquire(layer);
        } catch (TrunkException e) {
            if (e.corrupt()) throw new CorruptWeightsException("trunk layer " + layer + " is corrupt: " + e.getMessage());
            throw new ForwardException("trunk bind failed at layer " + layer + ": " + e.getMessage());
        }
        long t0 = System.nanoTime();
        LayerWeights w;
        try {
            w = WeightLoader.layer(binding.config(), layer, rewrite.apply(tensors(binding.layers().get(layer), bytes)));
        } catch (RuntimeException e) {
            bytes.close();
            throw e instanceof ForwardException f ? f : new ForwardException("trunk bind failed at layer " + layer + ": " + e.getMessage());
        }
        trunk.recordWiden(System.nanoTime() - t0);
        return new Held() {
            @Override
            public LayerWeights weights() {
                return w;
            }

            @Override
            public void close() {
                bytes.close();
            }
        };
    }

    /** The layer's tensors by suffix, bound from the run's bytes. */
    static WeightLoader.LayerTensors tensors(LayerBinding l, LayerBytes bytes) {
        return new WeightLoader.LayerTensors() {
            @Override
            public Matrix matrix(String suffix) {
                TensorBinding t = l.tensor(suffix);
                MemorySegment seg = segment(t, bytes);
                int rows = Math.toIntExact(t.info().shape()[0]), cols = Math.toIntExact(t.info().shape()[1]);
                DType d = t.info().dtype();
                if (d == DType.F16) return Matrix.f32(Widen.toFloats(t.info(), seg), rows, cols);
                return new Matrix(seg, d == DType.BF16 ? WeightType.BF16 : WeightType.F32, rows, cols);
            }

            @Override
            public float[] vector(String suffix, int take) {
                TensorBinding t = l.tensor(suffix);
                float[] f = Widen.toFloats(t.info(), segment(t, bytes));
                return f.length == t.take() ? f : Arrays.copyOf(f, Math.toIntExact(t.take()));
            }
        };
    }

    /** The tensor's bytes in the run, after checking the trunk agrees with the checkpoint on dtype, shape and length. */
    static MemorySegment segment(TensorBinding t, LayerBytes bytes) {
        TrunkManifest.Tensor m = bytes.meta(t.name());
        if (m.dtype() != t.info().dtype() || !Arrays.equals(m.shape(), t.info().shape()) || m.length() != t.info().length()) {
            throw new ForwardException("trunk bind failed at layer " + bytes.layer() + ": \"" + t.name() + "\" is " + m.dtype() + " "
                    + Arrays.toString(m.shape()) + " (" + m.length() + " bytes) in the trunk, " + t.info().dtype() + " "
                    + t.info().shapeString() + " (" + t.info().length() + " bytes) in the checkpoint");
        }
        return bytes.tensor(t.name());
    }
}
