package k3j.bisect;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import k3j.cache.ExpertForm;
import k3j.cache.ExpertLoadException;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertPart;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.io.DType;
import k3j.io.TensorInfo;
import k3j.io.TensorReader;
import k3j.kernels.Matrix;
import k3j.kernels.WeightType;
import k3j.conform.Conformance;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.LayerBinding;
import k3j.model.LayerStages;
import k3j.model.LayerWeights;
import k3j.model.Model;
import k3j.model.TensorBinding;
import k3j.model.WeightLoader;

/**
 * Runs one decoder layer of an opened model from given inputs, either as bound or with one {@link Candidate}
 * applied to its weights: the layer's tensors go through {@link WeightLoader#layer} (the one table that says
 * which tensor feeds which argument) with the candidate's substitutions; routed experts through an
 * {@link ExpertSource} that rewrites the candidate's experts. Nothing of the model is modified.
 */
public final class LayerRunner implements AutoCloseable {
    private final Model model;
    private final Workers workers;
    private final TensorReader reader = new TensorReader();
    private final Forward bound;
    private final ExpertSource experts;

    public LayerRunner(Model model, Workers workers) {
        this(model, workers, model.experts());
    }

    /**
     * Routed experts from {@code experts} instead of the model's own reader (an expert cache, or a view of the
     * checkpoint as a converter mis-indexed it); the candidates rewrite what it serves.
     */
    public LayerRunner(Model model, Workers workers, ExpertSource experts) {
        this(model, model.forward(workers, experts), workers);
    }

    /**
     * Over a forward already opened on {@code model}: its decoder layers (resident, or streamed from a trunk) and
     * its routed experts (resident, or through the expert cache) are the ones the candidates start from, so a
     * bisect runs under the same memory plan as the conformance it diagnoses.
     */
    public LayerRunner(Model model, Forward bound, Workers workers) {
        this.model = model;
        this.workers = workers;
        this.bound = bound;
        this.experts = bound.experts();
    }

    /** A runner over what {@code c} opened (its forward and model; see {@link Conformance#open}). */
    public static LayerRunner of(Conformance c, Workers workers) {
        if (c.model() == null || c.forward() == null) throw new IllegalStateException("the model did not bind: nothing to re-run");
        return new LayerRunner(c.model(), c.forward(), workers);
    }

    public Model model() {
        return model;
    }

    /** The layer as the model binds it. */
    public LayerStages run(int layer, float[] partialIn, List<float[]> snapshots, int tokens) {
        return bound.runLayer(layer, partialIn, snapshots, tokens);
    }

    /** The layer with {@code c} applied. */
    public LayerStages run(int layer, Candidate c, float[] partialIn, List<float[]> snapshots, int tokens) {
        return run(layer, c, partialIn, snapshots, tokens, null);
    }

    /**
     * The layer with {@code c} applied and the MoE selection forced ({@code forcedRouting} null: the router selects).
     * A candidate that rewrites experts only runs the bound layer (acquired from the forward's layer source, as the
     * conformance does); one that renames or transposes a tensor binds the layer afresh from the checkpoint, in an
     * arena released as soon as the layer has run (one layer's tensors at a time, never one set per candidate).
     */
    public LayerStages run(int layer, Candidate c, float[] partialIn, List<float[]> snapshots, int tokens, int[] forcedRouting) {
        Forward f = bound.withExperts(new RewrittenExperts(experts, c), false);
        if (!(c instanceof Candidate.Swap || c instanceof Candidate.Transpose)) return f.runLayer(layer, partialIn, snapshots, tokens, forcedRouting);
        try (Arena arena = Arena.ofShared()) {
            LayerBinding b = model.binding().layers().get(layer);
            LayerWeights lw = WeightLoader.layer(model.config(), layer, new Substituted(b, c, new WeightLoader(reader, arena), arena));
            return f.runLayer(lw, partialIn, snapshots, tokens, forcedRouting);
        }
    }

    /** A forward whose routed experts have {@code c} applied (the expert sweep of a candidate); the layers are the bound forward's. */
    public Forward forward(Candidate c) {
        return bound.withExperts(new RewrittenExperts(experts, c), false);
    }

    /** A layer's tensors by suffix with a swap or a transpose applied. */
    private final class Substituted implements WeightLoader.LayerTensors {
        private final LayerBinding b;
        private final Map<String, String> rename = new HashMap<>();
        private final String transposed;
        private final WeightLoader loader;
        private final Arena arena;

        Substituted(LayerBinding b, Candidate c, WeightLoader loader, Arena arena) {
            this.b = b;
            this.loader = loader;
            this.arena = arena;
            if (c instanceof Candidate.Swap s) {
                rename.put(s.a(), s.b());
                rename.put(s.b(), s.a());
            }
            this.transposed = c instanceof Candidate.Transpose t ? t.tensor() : null;
        }

        @Override
        public Matrix matrix(String suffix) {
            TensorBinding t = b.tensor(rename.getOrDefault(suffix, suffix));
            return suffix.equals(transposed) ? storedTransposed(t.info(), arena) : loader.matrix(t);
        }

        @Override
        public float[] vector(String suffix, int take) {
            float[] f = reader.readFloats(b.tensor(rename.getOrDefault(suffix, suffix)).info());
            if (suffix.equals(transposed)) throw new IllegalStateException(suffix + " is a vector; a transpose candidate needs a matrix");
            return take < 0 ? f : Arrays.copyOf(f, take);
        }
    }

    /** The [r][c] matrix whose bytes hold the row-major [c][r] matrix: element (i, j) is stored at j·r + i. */
    private Matrix storedTransposed(TensorInfo t, Arena arena) {
        int r = Math.toIntExact(t.shape()[0]), c = Math.toIntExact(t.shape()[1]);
        if (t.dtype() == DType.F16) {
            float[] f = reader.readFloats(t), out = new float[f.length];
            for (int i = 0; i < r; i++) for (int j = 0; j < c; j++) out[i * c + j] = f[j * r + i];
            return Matrix.f32(out, r, c);
        }
        int size = t.dtype().size();
        MemorySegment src = reader.read(t, arena);
        byte[] out = new byte[Math.toIntExact(t.length())];
        for (int i = 0; i < r; i++) {
            for (int j = 0; j < c; j++) MemorySegment.copy(src, ValueLayout.JAVA_BYTE, (long) (j * r + i) * size, out, (i * c + j) * size, size);
        }
        return new Matrix(MemorySegment.ofArray(out), t.dtype() == DType.BF16 ? WeightType.BF16 : WeightType.F32, r, c);
    }

    /**
     * The expert's bytes as stored in the checkpoint: what {@code inner} serves when it serves that form, else (an
     * expert cache holds the kernel form) read afresh into memory the collector frees, one expert at a time.
     */
    private ResidentExpert stored(ExpertSource inner, int layer, int expert) throws ExpertLoadException {
        ResidentExpert r = inner.get(layer, expert);
        if (r.form() == ExpertForm.STORED) return r;
        ExpertLocation loc = model.experts().locate(layer, expert);
        MemorySegment bytes = Arena.ofAuto().allocate(loc.length(), 64);
        try {
            for (ExpertPart p : ExpertPart.values()) {
                ExpertLocation.Extent e = loc.parts().get(p.ordinal());
                MemorySegment.copy(reader.read(loc.file(), e.offset(), e.length(), "layer " + layer + " expert " + expert, Arena.ofAuto()), 0, bytes,
                        loc.partOffset(p), e.length());
            }
        } catch (k3j.io.CheckpointException e) {
            throw new ExpertLoadException(layer, expert, e.getMessage(), e);
        }
        return new ResidentExpert(layer, expert, bytes, loc);
    }

    /** The model's routed experts with a nibble flip or an expert swap applied. */
    private final class RewrittenExperts implements ExpertSource {
        private final ExpertSource inner;
        private final Candidate c;

        RewrittenExperts(ExpertSource inner, Candidate c) {
            this.inner = inner;
            this.c = c;
        }

        @Override
        public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
            return switch (c) {
                case Candidate.ExpertSwap s when expert == s.a() || expert == s.b() -> {
                    ResidentExpert other = inner.get(layer, expert == s.a() ? s.b() : s.a());
                    yield new ResidentExpert(layer, expert, other.bytes(), other.location(), other.form());
                }
                case Candidate.NibbleFlip n when expert == n.expert() -> {
                    ResidentExpert r = stored(inner, layer, expert);
                    byte[] copy = r.bytes().toArray(ValueLayout.JAVA_BYTE);
                    for (ExpertPart p : n.parts()) {
                        int from = Math.toIntExact(r.location().partOffset(p)), to = from + Math.toIntExact(r.location().partLength(p));
                        for (int i = from; i < to; i++) copy[i] = Corruptions.flipNibbles(copy[i]);
                    }
                    yield new ResidentExpert(layer, expert, MemorySegment.ofArray(copy), r.location());
                }
                case Candidate.GateUpSwap g when expert == g.expert() -> {
                    ResidentExpert r = stored(inner, layer, expert);
                    byte[] copy = r.bytes().toArray(ValueLayout.JAVA_BYTE);
                    swap(copy, r, ExpertPart.W1_PACKED, ExpertPart.W3_PACKED);
                    swap(copy, r, ExpertPart.W1_SCALE, ExpertPart.W3_SCALE);
                    yield new ResidentExpert(layer, expert, MemorySegment.ofArray(copy), r.location());
                }
                default -> inner.get(layer, expert);
            };
        }

        @Override
        public int getMany(int layer, int... experts) {
            return 0;
        }

        private static void swap(byte[] b, ResidentExpert r, ExpertPart x, ExpertPart y) {
            int a = Math.toIntExact(r.location().partOffset(x)), c = Math.toIntExact(r.location().partOffset(y));
            int n = Math.toIntExact(r.location().partLength(x));
            if (n != r.location().partLength(y)) throw new IllegalStateException(x + " and " + y + " differ in length");
            byte[] t = java.util.Arrays.copyOfRange(b, a, a + n);
            System.arraycopy(b, c, b, a, n);
            System.arraycopy(t, 0, b, c, n);
        }
    }

    /** Every candidate bisect tries on this layer, in a fixed order (see {@link Candidates}). */
    public List<Candidate> candidates(int layer, int[] routedExperts) {
        return Candidates.of(model.binding().layers().get(layer), routedExperts, model.config().expertCount());
    }

    @Override
    public void close() {
        reader.close();
    }

}
