package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dense products y[t] = W x[t] for bf16 and float32 weights (FP-CONTRACT §matvec, ENGINE §3.3 v1.0.0):
 * per output row sixteen double accumulators a[l] over full blocks of 16 (l = i mod 16), the fixed tree
 * b_m = (a_m + a_{m+4}) + (a_{m+8} + a_{m+12}), acc = (b0 + b1) + (b2 + b3), then the in mod 16 tail
 * added in increasing i, y = (float) acc.
 *
 * <p>Fast path: the sixteen accumulators are four 256-bit DoubleVectors A0..A3 (lane l of A_m is
 * a[4m + l]); the tree's first level is lane-wise (A0 + A1) + (A2 + A3), the second level is done on the
 * four lanes in scalar. No reduceLanes (unspecified order). x is widened to double once per call. bf16 is
 * widened 4 elements per load (ShortVector64, S2I, shift, F2D part 0: the only intrinsified path). Two
 * rows in flight for one token; one row and two tokens in flight for a batch, so a weight row is read
 * once for all tokens. Products of widened floats are exact in double, so mul-then-add is the contract.
 */
public final class MatVec {
    private MatVec() {}

    static final VectorSpecies<Double> D = DoubleVector.SPECIES_256;
    static final VectorSpecies<Short> S64 = ShortVector.SPECIES_64;
    static final VectorSpecies<Integer> I128 = IntVector.SPECIES_128;
    static final VectorSpecies<Float> F128 = FloatVector.SPECIES_128;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    // ------------------------------------------------------------------ reference path

    /** Reference: y[tokens][rows] = W x[tokens][cols], one row at a time, exactly as the contract reads. */
    public static void reference(float[] y, float[] x, int tokens, Matrix w) {
        int in = w.cols(), out = w.rows();
        checkShapes(y, x, tokens, w);
        double[] a = new double[16];
        for (int t = 0; t < tokens; t++) {
            for (int o = 0; o < out; o++) {
                java.util.Arrays.fill(a, 0.0);
                int i = 0;
                for (; i + 16 <= in; i += 16) {
                    for (int l = 0; l < 16; l++) a[l] = a[l] + (double) w.get(o, i + l) * (double) x[t * in + i + l];
                }
                double b0 = (a[0] + a[4]) + (a[8] + a[12]);
                double b1 = (a[1] + a[5]) + (a[9] + a[13]);
                double b2 = (a[2] + a[6]) + (a[10] + a[14]);
                double b3 = (a[3] + a[7]) + (a[11] + a[15]);
                double acc = (b0 + b1) + (b2 + b3);
                for (; i < in; i++) acc = acc + (double) w.get(o, i) * (double) x[t * in + i];
                y[t * out + o] = (float) acc;
            }
        }
    }

    // ------------------------------------------------------------------ fast path

    /** Fast: y[tokens][rows] = W x[tokens][cols], bit-identical to {@link #reference}. */
    public static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w) {
        checkShapes(y, x, tokens, w);
        int in = w.cols();
        double[] xd = new double[tokens * in];
        for (int i = 0; i < xd.length; i++) xd[i] = x[i];
        if (w.type() == WeightType.BF16) {
            if (tokens == 1) workers.split(w.rows(), 2, (from, to) -> bf16OneToken(y, xd, w.data(), in, from, to));
            else workers.split(w.rows(), 2, (from, to) -> bf16Tokens(y, xd, tokens, w.data(), in, w.rows(), from, to));
        } else {
            workers.split(w.rows(), 2, (from, to) -> f32Rows(y, xd, tokens, w.data(), in, w.rows(), from, to));
        }
    }

    /** Fast, one token. */
    public static void matvec(Workers workers, float[] y, float[] x, Matrix w) {
        matmul(workers, y, x, 1, w);
    }

    static void checkShapes(float[] y, float[] x, int tokens, Matrix w) {
        if (tokens < 1) throw new IllegalArgumentException("tokens must be >= 1, got " + tokens);
        if (x.length < (long) tokens * w.cols()) throw new IllegalArgumentException("x has " + x.length + " floats, needs " + tokens + " x " + w.cols());
        if (y.length < (long) tokens * w.rows()) throw new IllegalArgumentException("y has " + y.length + " floats, needs " + tokens + " x " + w.rows());
    }

    /** The bf16 tail of one row from element i on, continuing acc (scalar, increasing i). */
    private static double bf16Tail(double acc, MemorySegment seg, long rowByte, double[] xd, int xOff, int i, int in) {
        for (; i < in; i++) acc = acc + (double) Fp.bf16(seg.get(Matrix.BF16, rowByte + 2L * i)) * xd[xOff + i];
        return acc;
    }

    private static void bf16OneToken(float[] y, double[] xd, MemorySegment seg, int in, int from, int to) {
        double[] lanes = new double[4];
        int o = from;
        for (; o + 2 <= to; o += 2) {
            long r0 = 2L * in * o, r1 = r0 + 2L * in;
            DoubleVector a0 = DoubleVector.zero(D), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
            int i = 0;
            for (; i + 16 <= in; i += 16) {
                DoubleVector x0 = DoubleVector.fromArray(D, xd, i), x1 = DoubleVector.fromArray(D, xd, i + 4);
                DoubleVector x2 = DoubleVector.fromArray(D, xd, i + 8), x3 = DoubleVector.fromArray(D, xd, i + 12);
                long b0 = r0 + 2L * i, b1 = r1 + 2L * i;
                a0 = a0.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x0));
                a1 = a1.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 8, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x1));
                a2 = a2.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 16, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x2));
                a3 = a3.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 24, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x3));
                c0 = c0.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b1, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x0));
                c1 = c1.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b1 + 8, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x1));
                c2 = c2.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b1 + 16, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x2));
                c3 = c3.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b1 + 24, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(x3));
            }
            a0.add(a1).add(a2.add(a3)).intoArray(lanes, 0);
            y[o] = (float) bf16Tail((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), seg, r0, xd, 0, i, in);
            c0.add(c1).add(c2.add(c3)).intoArray(lanes, 0);
            y[o + 1] = (float) bf16Tail((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), seg, r1, xd, 0, i, in);
        }
        for (; o < to; o++) bf16Row(y, o, xd, 0, seg, 2L * in * o, in, lanes);
    }

    /** One bf16 row for one token (x at xOff), result to y[yIndex]. */
    private static void bf16Row(float[] y, int yIndex, double[] xd, int xOff, MemorySegment seg, long r0, int in, double[] lanes) {
        DoubleVector a0 = DoubleVector.zero(D), a1 = a0, a2 = a0, a3 = a0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            long b0 = r0 + 2L * i;
            a0 = a0.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xOff + i)));
            a1 = a1.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 8, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xOff + i + 4)));
            a2 = a2.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 16, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xOff + i + 8)));
            a3 = a3.add(((DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 24, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xOff + i + 12)));
        }
        a0.add(a1).add(a2.add(a3)).intoArray(lanes, 0);
        y[yIndex] = (float) bf16Tail((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), seg, r0, xd, xOff, i, in);
    }

    private static void bf16Tokens(float[] y, double[] xd, int tokens, MemorySegment seg, int in, int out, int from, int to) {
        double[] lanes = new double[4];
        for (int o = from; o < to; o++) {
            long r0 = 2L * in * o;
            int t = 0;
            for (; t + 2 <= tokens; t += 2) {
                int xa = t * in, xb = xa + in;
                DoubleVector a0 = DoubleVector.zero(D), a1 = a0, a2 = a0, a3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0;
                int i = 0;
                for (; i + 16 <= in; i += 16) {
                    long b0 = r0 + 2L * i;
                    DoubleVector w0 = (DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
                    DoubleVector w1 = (DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 8, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
                    DoubleVector w2 = (DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 16, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
                    DoubleVector w3 = (DoubleVector) ((IntVector) ShortVector.fromMemorySegment(S64, seg, b0 + 24, LE).convertShape(VectorOperators.S2I, I128, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
                    a0 = a0.add(w0.mul(DoubleVector.fromArray(D, xd, xa + i)));
                    a1 = a1.add(w1.mul(DoubleVector.fromArray(D, xd, xa + i + 4)));
                    a2 = a2.add(w2.mul(DoubleVector.fromArray(D, xd, xa + i + 8)));
                    a3 = a3.add(w3.mul(DoubleVector.fromArray(D, xd, xa + i + 12)));
                    c0 = c0.add(w0.mul(DoubleVector.fromArray(D, xd, xb + i)));
                    c1 = c1.add(w1.mul(DoubleVector.fromArray(D, xd, xb + i + 4)));
                    c2 = c2.add(w2.mul(DoubleVector.fromArray(D, xd, xb + i + 8)));
                    c3 = c3.add(w3.mul(DoubleVector.fromArray(D, xd, xb + i + 12)));
                }
                a0.add(a1).add(a2.add(a3)).intoArray(lanes, 0);
                y[t * out + o] = (float) bf16Tail((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), seg, r0, xd, xa, i, in);
                c0.add(c1).add(c2.add(c3)).intoArray(lanes, 0);
                y[(t + 1) * out + o] = (float) bf16Tail((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), seg, r0, xd, xb, i, in);
            }
            if (t < tokens) bf16Row(y, t * out + o, xd, t * in, seg, r0, in, lanes);
        }
    }

    private static void f32Rows(float[] y, double[] xd, int tokens, MemorySegment seg, int in, int out, int from, int to) {
        double[] lanes = new double[4];
        for (int o = from; o < to; o++) {
            long r0 = 4L * in * o;
            for (int t = 0; t < tokens; t++) {
                int xa = t * in;
                DoubleVector a0 = DoubleVector.zero(D), a1 = a0, a2 = a0, a3 = a0;
                int i = 0;
                for (; i + 16 <= in; i += 16) {
                    long b0 = r0 + 4L * i;
                    a0 = a0.add(((DoubleVector) FloatVector.fromMemorySegment(F128, seg, b0, LE).convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xa + i)));
                    a1 = a1.add(((DoubleVector) FloatVector.fromMemorySegment(F128, seg, b0 + 16, LE).convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xa + i + 4)));
                    a2 = a2.add(((DoubleVector) FloatVector.fromMemorySegment(F128, seg, b0 + 32, LE).convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xa + i + 8)));
                    a3 = a3.add(((DoubleVector) FloatVector.fromMemorySegment(F128, seg, b0 + 48, LE).convertShape(VectorOperators.F2D, D, 0)).mul(DoubleVector.fromArray(D, xd, xa + i + 12)));
                }
                a0.add(a1).add(a2.add(a3)).intoArray(lanes, 0);
                double acc = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
                for (; i < in; i++) acc = acc + (double) seg.get(Matrix.F32, r0 + 4L * i) * xd[xa + i];
                y[t * out + o] = (float) acc;
            }
        }
    }
}
