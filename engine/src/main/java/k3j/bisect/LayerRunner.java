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
import k3j.compare.Conformance;
import k3j.io.DType;
import k3j.io.TensorReader;
import k3j.kernels.Matrix;
import k3j.kernels.WeightType;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.LayerBinding;
import k3j.model.LayerStages;
import k3j.model.Model;
import k3j.model.TensorBinding;
import k3j.model.WeightLoader;

/**
 * Runs one decoder layer of an opened model from given inputs, either as bound or with one {@link Candidate}
 * applied to its weights: the layer's tensors go through {@link WeightLoader#layer} (the one table that says
 * which tensor feeds which argument) with the candidate's substitutions, bound again from the bytes the forward's
 * layer source already holds; routed experts through an {@link ExpertSource} that rewrites the candidate's experts.
 * Nothing of the model is modified, and nothing but one candidate's scratch is added to what the forward holds.
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
     * A candidate that rewrites experts runs the bound layer (acquired from the forward's layer source, as the
     * conformance does); one that renames or transposes a tensor binds the layer again from the bytes that source
     * already holds (the resident mapping or the trunk slot). What a candidate adds — one matrix held transposed,
     * or one expert read and rewritten — lives in an arena released as soon as the layer has run; {@link #scratchBytes}
     * is its most, which the memory plan of a bisect counts.
     */
    public LayerStages run(int layer, Candidate c, float[] partialIn, List<float[]> snapshots, int tokens, int[] forcedRouting) {
        try (Arena scratch = Arena.ofShared()) {
            Forward f = forward(c, scratch);
            if (!(c instanceof Candidate.Swap || c instanceof Candidate.Transpose)) return f.runLayer(layer, partialIn, snapshots, tokens, forcedRouting);
            return f.runLayer(layer, t -> new Substituted(t, c, scratch), partialIn, snapshots, tokens, forcedRouting);
        }
    }

    /**
     * A forward whose routed experts have {@code c} applied (the expert sweep of a candidate); the layers are the bound
     * forward's. The rewritten experts live in {@code scratch}: use the forward only while it is open.
     */
    public Forward forward(Candidate c, Arena scratch) {
        return bound.withExperts(new RewrittenExperts(experts, c, scratch), false);
    }

    /**
     * The most a candidate adds while it runs: the largest dense matrix of a layer held transposed, or one routed
     * expert's stored bytes read and a rewritten copy of them (a nibble flip, a w1/w3 swap).
     */
    public static long scratchBytes(k3j.model.ModelBinding b) {
        long most = 0;
        for (LayerBinding l : b.layers()) {
            for (TensorBinding t : l.tensors().values()) {
                long[] s = t.info().shape();
                if (t.storage() == k3j.model.Storage.MATRIX && s.length == 2) most = Math.max(most, t.info().elementCount() * (t.info().dtype() == DType.BF16 ? 2 : 4));
            }
            for (ExpertLocation e : l.experts()) most = Math.max(most, 2 * e.length());
        }
        return most;
    }

    /** A layer's tensors by suffix with a swap or a transpose applied. */
    private static final class Substituted implements WeightLoader.LayerTensors {
        private final WeightLoader.LayerTensors inner;
        private final Map<String, String> rename = new HashMap<>();
        private final String transposed;
        private final Arena scratch;

        Substituted(WeightLoader.LayerTensors inner, Candidate c, Arena scratch) {
            this.inner = inner;
            this.scratch = scratch;
            if (c instanceof Candidate.Swap s) {
                rename.put(s.a(), s.b());
                rename.put(s.b(), s.a());
            }
            this.transposed = c instanceof Candidate.Transpose t ? t.tensor() : null;
        }

        @Override
        public Matrix matrix(String suffix) {
            Matrix m = inner.matrix(rename.getOrDefault(suffix, suffix));
            return suffix.equals(transposed) ? storedTransposed(m, scratch) : m;
        }

        @Override
        public float[] vector(String suffix, int take) {
            if (suffix.equals(transposed)) throw new IllegalStateException(suffix + " is a vector; a transpose candidate needs a matrix");
            float[] f = inner.vector(rename.getOrDefault(suffix, suffix), take);
            return take < 0 || f.length == take ? f : Arrays.copyOf(f, take);
        }
    }

    /**
     * The [r][c] matrix whose bytes hold the row-major [c][r] matrix: element (i, j) is read at j·r + i of the bound
     * matrix's bytes (the checkpoint's, or their F32 widening for F16).
     */
    static Matrix storedTransposed(Matrix m, Arena scratch) {
        int r = m.rows(), c = m.cols();
        MemorySegment src = m.data(), out = scratch.allocate(src.byteSize(), 64);
        if (m.type() == WeightType.BF16) {
            for (int i = 0; i < r; i++) for (int j = 0; j < c; j++) out.setAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, (long) i * c + j, src.getAtIndex(ValueLayout.JAVA_SHORT_UNALIGNED, (long) j * r + i));
        } else if (m.type() == WeightType.F32) {
            for (int i = 0; i < r; i++) for (int j = 0; j < c; j++) out.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, (long) i * c + j, src.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, (long) j * r + i));
        } else {
            throw new IllegalStateException("a stored transpose of a " + m.type() + " matrix");
        }
        return new Matrix(out, m.type(), r, c);
    }

    /**
     * The expert's bytes as stored in the checkpoint: what {@code inner} serves when it serves that form, else (an
     * expert cache holds the kernel form) read afresh into {@code scratch}.
     */
    private ResidentExpert stored(ExpertSource inner, int layer, int expert, Arena scratch) throws ExpertLoadException {
        ResidentExpert r = inner.get(layer, expert);
        if (r.form() == ExpertForm.STORED) return r;
        ExpertLocation loc = model.experts().locate(layer, expert);
        MemorySegment bytes = scratch.allocate(loc.length(), 64);
        try {
            for (ExpertPart p : ExpertPart.values()) {
                ExpertLocation.Extent e = loc.parts().get(p.ordinal());
                try (Arena part = Arena.ofConfined()) {
                    MemorySegment.copy(reader.read(loc.file(), e.offset(), e.length(), "layer " + layer + " expert " + expert, part), 0, bytes, loc.partOffset(p), e.length());
                }
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
        private final Arena scratch;

        RewrittenExperts(ExpertSource inner, Candidate c, Arena scratch) {
            this.inner = inner;
            this.c = c;
            this.scratch = scratch;
        }

        @Override
        public ResidentExpert get(int layer, int expert) throws ExpertLoadException {
            return switch (c) {
                case Candidate.ExpertSwap s when expert == s.a() || expert == s.b() -> {
                    ResidentExpert other = inner.get(layer, expert == s.a() ? s.b() : s.a());
                    yield new ResidentExpert(layer, expert, other.bytes(), other.location(), other.form());
                }
                case Candidate.NibbleFlip n when expert == n.expert() -> {
                    ResidentExpert r = stored(inner, layer, expert, scratch);
                    MemorySegment copy = scratch.allocate(r.bytes().byteSize(), 64).copyFrom(r.bytes());
                    for (ExpertPart p : n.parts()) {
                        long from = r.location().partOffset(p), to = from + r.location().partLength(p);
                        for (long i = from; i < to; i++) copy.set(ValueLayout.JAVA_BYTE, i, Corruptions.flipNibbles(copy.get(ValueLayout.JAVA_BYTE, i)));
                    }
                    yield new ResidentExpert(layer, expert, copy, r.location());
                }
                case Candidate.GateUpSwap g when expert == g.expert() -> {
                    ResidentExpert r = stored(inner, layer, expert, scratch);
                    MemorySegment copy = scratch.allocate(r.bytes().byteSize(), 64).copyFrom(r.bytes());
                    swap(copy, r, ExpertPart.W1_PACKED, ExpertPart.W3_PACKED);
                    swap(copy, r, ExpertPart.W1_SCALE, ExpertPart.W3_SCALE);
                    yield new ResidentExpert(layer, expert, copy, r.location());
                }
                default -> inner.get(layer, expert);
            };
        }

        @Override
        public int getMany(int layer, int... experts) {
            return 0;
        }

        private static void swap(MemorySegment b, ResidentExpert r, ExpertPart x, ExpertPart y) {
            long a = r.location().partOffset(x), c = r.location().partOffset(y), n = r.location().partLength(x);
            if (n != r.location().partLength(y)) throw new IllegalStateException(x + " and " + y + " differ in length");
            byte[] t = b.asSlice(a, n).toArray(ValueLayout.JAVA_BYTE);
            MemorySegment.copy(b, c, b, a, n);
            MemorySegment.copy(MemorySegment.ofArray(t), 0, b, c, n);
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
