package k3j.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/** Embedding rows (docs/semantics.md §3.6): row id of the table widened exactly to float. */
public final class Embedding {
    private Embedding() {}

    static final VectorSpecies<Short> S128 = ShortVector.SPECIES_128;
    static final VectorSpecies<Integer> I256 = IntVector.SPECIES_256;

    public static void rowReference(float[] dst, int off, Matrix table, int id) {
        checkId(table, id);
        table.row(id, dst, off);
    }

    /** Fast: 8 bf16 per load (S2I part 0 into 256 bits, shift, reinterpret), exact like the reference. */
    public static void row(float[] dst, int off, Matrix table, int id) {
        checkId(table, id);
        if (table.type() != WeightType.BF16 || !KernelPath.vector(table.cols())) {
            table.row(id, dst, off);
            return;
        }
        int n = table.cols();
        long base = 2L * n * id;
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            ((IntVector) ShortVector.fromMemorySegment(S128, table.data(), base + 2L * i, MatVec.LE).convertShape(VectorOperators.S2I, I256, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().intoArray(dst, off + i);
        }
        for (; i < n; i++) dst[off + i] = table.get(id, i);
    }

    static void checkId(Matrix table, int id) {
        if (id < 0 || id >= table.rows()) throw new IllegalArgumentException("token id " + id + " outside [0, " + table.rows() + ")");
    }

    /** For FloatVector users that need the species. */
    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
}
