package k3j.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Greedy argmax (docs/semantics.md §3.19): the FIRST maximal index wins (strict &gt;), NaN never wins, and an input
 * with nothing above −∞ (all −∞ or NaN) gives index 0.
 */
public final class Argmax {
    private Argmax() {}

    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_256;

    public static int reference(float[] v, int off, int n) {
        float best = Float.NEGATIVE_INFINITY;
        int at = 0;
        for (int i = 0; i < n; i++) {
            if (v[off + i] > best) {
                best = v[off + i];
                at = i;
            }
        }
        return at;
    }

    /** Per-lane first maxima, then the lowest index among lanes holding the overall maximum: same answer. */
    public static int fast(float[] v, int off, int n) {
        if (!KernelPath.vector(n)) return reference(v, off, n);
        FloatVector best = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY);
        IntVector at = IntVector.zero(I);
        IntVector iota = IntVector.fromArray(I, new int[] {0, 1, 2, 3, 4, 5, 6, 7}, 0);
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            FloatVector x = FloatVector.fromArray(F, v, off + i);
            VectorMask<Float> gt = x.compare(VectorOperators.GT, best);
            best = best.blend(x, gt);
            at = at.blend(iota.add(i), gt.cast(I));
        }
        float[] b = best.toArray();
        int[] a = at.toArray();
        float m = Float.NEGATIVE_INFINITY;
        int found = 0;
        for (int l = 0; l < 8; l++) {
            if (b[l] > m || (b[l] == m && m != Float.NEGATIVE_INFINITY && a[l] < found)) {
                m = b[l];
                found = a[l];
            }
        }
        for (; i < n; i++) {
            if (v[off + i] > m) {
                m = v[off + i];
                found = i;
            }
        }
        return found;
    }
}
