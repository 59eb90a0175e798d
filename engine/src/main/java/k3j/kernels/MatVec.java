package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.DoubleVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dense products y[t] = W x[t] for bf16 and float32 weights (docs/fp-contract.md §2 "Dense matvec", docs/semantics.md §3.3):
 * per output row sixteen double accumulators a[l] over full blocks of 16 (l = i mod 16), the fixed tree
 * b_m = (a_m + a_{m+4}) + (a_{m+8} + a_{m+12}), acc = (b0 + b1) + (b2 + b3), then the in mod 16 tail
 * added in increasing i, y = (float) acc.
 *
 * <p>Fast path: the sixteen accumulators are four 256-bit DoubleVectors A0..A3 (lane l of A_m is
 * a[4m + l]); the tree's first level is lane-wise (A0 + A1) + (A2 + A3), the second level is done on the
 * four lanes in scalar. No reduceLanes (unspecified order). x is widened to double once per call. bf16 is
 * widened 4 elements per load (ShortVector64, S2I, shift, F2D part 0: the only intrinsified path). Two
 * rows in flight for one token; one row and four tokens in flight for a batch (then one at a time), so a weight
 * block is read and widened once for four tokens. Products of widened floats are exact in double, so mul-then-add is the contract.
 */
public final class MatVec {
    private MatVec() {}

    static final VectorSpecies<Double> D = DoubleVector.SPECIES_256;
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

    // ------------------------------------------------------------------ scalar path

    /**
     * The contract's order with the sixteen accumulators in locals: what small matrices run (no Vector API
     * warm-up, no per-call set-up), bit-identical to {@link #reference}.
     */
    static void scalar(float[] y, float[] x, int tokens, Matrix w) {
        int in = w.cols(), out = w.rows();
        boolean bf16 = w.type() == WeightType.BF16;
        MemorySegment seg = w.data();
        // One bulk copy per row, then plain array loads: a MemorySegment access per element is a deep VarHandle
        // call chain until C2 has compiled it, which made the first tokens of a small model crawl.
        short[] hb = bf16 ? new short[in] : null;
        float[] fb = bf16 ? null : new float[in];
        for (int o = 0; o < out; o++) {
            if (bf16) MemorySegment.copy(seg, Matrix.BF16, 2L * in * o, hb, 0, in);
            else MemorySegment.copy(seg, Matrix.F32, 4L * in * o, fb, 0, in);
            for (int t = 0; t < tokens; t++) y[t * out + o] = (float) (bf16 ? rowBf16(hb, x, t * in, in) : rowF32(fb, x, t * in, in));
        }
    }

    private static double rowBf16(short[] w, float[] x, int xo, int in) {
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
        double a8 = 0, a9 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0, a14 = 0, a15 = 0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            int xi = xo + i;
            a0 = a0 + (double) Fp.bf16(w[i]) * (double) x[xi];
            a1 = a1 + (double) Fp.bf16(w[i + 1]) * (double) x[xi + 1];
            a2 = a2 + (double) Fp.bf16(w[i + 2]) * (double) x[xi + 2];
            a3 = a3 + (double) Fp.bf16(w[i + 3]) * (double) x[xi + 3];
            a4 = a4 + (double) Fp.bf16(w[i + 4]) * (double) x[xi + 4];
            a5 = a5 + (double) Fp.bf16(w[i + 5]) * (double) x[xi + 5];
            a6 = a6 + (double) Fp.bf16(w[i + 6]) * (double) x[xi + 6];
            a7 = a7 + (double) Fp.bf16(w[i + 7]) * (double) x[xi + 7];
            a8 = a8 + (double) Fp.bf16(w[i + 8]) * (double) x[xi + 8];
            a9 = a9 + (double) Fp.bf16(w[i + 9]) * (double) x[xi + 9];
            a10 = a10 + (double) Fp.bf16(w[i + 10]) * (double) x[xi + 10];
            a11 = a11 + (double) Fp.bf16(w[i + 11]) * (double) x[xi + 11];
            a12 = a12 + (double) Fp.bf16(w[i + 12]) * (double) x[xi + 12];
            a13 = a13 + (double) Fp.bf16(w[i + 13]) * (double) x[xi + 13];
            a14 = a14 + (double) Fp.bf16(w[i + 14]) * (double) x[xi + 14];
            a15 = a15 + (double) Fp.bf16(w[i + 15]) * (double) x[xi + 15];
        }
        double b0 = (a0 + a4) + (a8 + a12), b1 = (a1 + a5) + (a9 + a13), b2 = (a2 + a6) + (a10 + a14), b3 = (a3 + a7) + (a11 + a15);
        double acc = (b0 + b1) + (b2 + b3);
        for (; i < in; i++) acc = acc + (double) Fp.bf16(w[i]) * (double) x[xo + i];
        return acc;
    }

    private static double rowF32(float[] w, float[] x, int xo, int in) {
        double a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
        double a8 = 0, a9 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0, a14 = 0, a15 = 0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            int xi = xo + i;
            a0 = a0 + (double) w[i] * (double) x[xi];
            a1 = a1 + (double) w[i + 1] * (double) x[xi + 1];
            a2 = a2 + (double) w[i + 2] * (double) x[xi + 2];
            a3 = a3 + (double) w[i + 3] * (double) x[xi + 3];
            a4 = a4 + (double) w[i + 4] * (double) x[xi + 4];
            a5 = a5 + (double) w[i + 5] * (double) x[xi + 5];
            a6 = a6 + (double) w[i + 6] * (double) x[xi + 6];
            a7 = a7 + (double) w[i + 7] * (double) x[xi + 7];
            a8 = a8 + (double) w[i + 8] * (double) x[xi + 8];
            a9 = a9 + (double) w[i + 9] * (double) x[xi + 9];
            a10 = a10 + (double) w[i + 10] * (double) x[xi + 10];
            a11 = a11 + (double) w[i + 11] * (double) x[xi + 11];
            a12 = a12 + (double) w[i + 12] * (double) x[xi + 12];
            a13 = a13 + (double) w[i + 13] * (double) x[xi + 13];
            a14 = a14 + (double) w[i + 14] * (double) x[xi + 14];
            a15 = a15 + (double) w[i + 15] * (double) x[xi + 15];
        }
        double b0 = (a0 + a4) + (a8 + a12), b1 = (a1 + a5) + (a9 + a13), b2 = (a2 + a6) + (a10 + a14), b3 = (a3 + a7) + (a11 + a15);
        double acc = (b0 + b1) + (b2 + b3);
        for (; i < in; i++) acc = acc + (double) w[i] * (double) x[xo + i];
        return acc;
    }

    // ------------------------------------------------------------------ fast path

    /** Fast: y[tokens][rows] = W x[tokens][cols], bit-identical to {@link #reference}. */
    public static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w) {
        matmul(workers, y, x, tokens, w, 1L << 30);
    }

    /** {@link #matmul} with the rows processed in slices of at most {@code sliceBytes} (tests pin that slicing keeps the bits). */
    static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w, long sliceBytes) {
        checkShapes(y, x, tokens, w);
        if (!KernelPath.vector((long) tokens * w.rows() * w.cols())) {
            scalar(y, x, tokens, w);
            return;
        }
        int in = w.cols();
        double[] xd = new double[tokens * in];
        for (int i = 0; i < xd.length; i++) xd[i] = x[i];
        double[] xp = w.type() == WeightType.BF16 ? laneOrder(xd, tokens, in) : null;
        // Rows in slices of at most 1 GiB: a segment over 2 GiB gets long-indexed bounds checks that C2 does
        // not hoist (the 2.35 GB LM head ran 1.7x slower per row than a 176 MB matrix). Rows are independent,
        // so slicing changes no bits.
        int rows = w.rows(), out = rows;
        long rowBytes = (long) in * w.type().bytes;
        int chunk = (int) Math.max(2, Math.min(rows, (sliceBytes / rowBytes) & ~1L));
        for (int c0 = 0; c0 < rows; c0 += chunk) {
            final int first = c0, n = Math.min(rows, c0 + chunk) - c0;
            final MemorySegment part = w.data().asSlice(rowBytes * c0, rowBytes * n);
            if (w.type() == WeightType.BF16) {
                if (tokens == 1) workers.split(n, 2, (from, to) -> bf16OneToken(y, xd, xp, part, in, first, from, to));
                else workers.split(n, 2, (from, to) -> bf16Tokens(y, xd, xp, tokens, part, in, out, first, from, to));
            } else {
                workers.split(n, 2, (from, to) -> f32Rows(y, xd, tokens, part, in, out, first, from, to));
            }
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

    /**
     * x in the fast path's lane order: per full block of 16, [x0 x2 x4 x6 | x1 x3 x5 x7 | x8 x10 x12 x14 |
     * x9 x11 x13 x15], because one 128-bit load of 8 bf16 gives the even elements (int << 16) and the odd
     * ones (int & 0xFFFF0000) without any widening shuffle. Lane order is storage only: accumulator a[l]
     * still sums exactly the elements i ≡ l (mod 16), in block order.
     */
    private static double[] laneOrder(double[] xd, int tokens, int in) {
        double[] xp = new double[xd.length];
        for (int t = 0; t < tokens; t++) {
            int b = t * in, i = 0;
            for (; i + 16 <= in; i += 16) {
                for (int k = 0; k < 4; k++) {
                    xp[b + i + k] = xd[b + i + 2 * k];
                    xp[b + i + 4 + k] = xd[b + i + 2 * k + 1];
                    xp[b + i + 8 + k] = xd[b + i + 8 + 2 * k];
                    xp[b + i + 12 + k] = xd[b + i + 9 + 2 * k];
                }
            }
            for (; i < in; i++) xp[b + i] = xd[b + i];
        }
        return xp;
    }

    /**
     * The contract's tree from the four lane-ordered accumulators stored in t[0..15]
     * (t = [a0 a2 a4 a6 | a1 a3 a5 a7 | a8 a10 a12 a14 | a9 a11 a13 a15]).
     */
    private static double tree(double[] t) {
        double b0 = (t[0] + t[2]) + (t[8] + t[10]);
        double b1 = (t[4] + t[6]) + (t[12] + t[14]);
        double b2 = (t[1] + t[3]) + (t[9] + t[11]);
        double b3 = (t[5] + t[7]) + (t[13] + t[15]);
        return (b0 + b1) + (b2 + b3);
    }

    static final VectorSpecies<Integer> I128x = IntVector.SPECIES_128;

    // The products are exact in double (bf16 x float), so fma(w, x, acc) IS acc + w*x: one rounding either way.
    private static void bf16OneToken(float[] y, double[] xd, double[] xp, MemorySegment seg, int in, int first, int from, int to) {
        double[] t = new double[16];
        int o = from;
        for (; o + 2 <= to; o += 2) bf16Pair(y, first + o, xd, xp, seg, 2L * in * o, in, t);
        for (; o < to; o++) bf16Row(y, first + o, xd, xp, 0, seg, 2L * in * o, in, t);
    }

    /** Two adjacent bf16 rows (the first at byte r0) for one token, results to y[yIndex] and y[yIndex + 1]. */
    private static void bf16Pair(float[] y, int yIndex, double[] xd, double[] xp, MemorySegment seg, long r0, int in, double[] t) {
        long r1 = r0 + 2L * in;
        DoubleVector e0 = DoubleVector.zero(D), o0 = e0, e1 = e0, o1 = e0, f0 = e0, p0 = e0, f1 = e0, p1 = e0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            DoubleVector xe0 = DoubleVector.fromArray(D, xp, i), xo0 = DoubleVector.fromArray(D, xp, i + 4);
            DoubleVector xe1 = DoubleVector.fromArray(D, xp, i + 8), xo1 = DoubleVector.fromArray(D, xp, i + 12);
            IntVector w0 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i, LE), w1 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i + 16, LE);
            IntVector v0 = IntVector.fromMemorySegment(I128x, seg, r1 + 2L * i, LE), v1 = IntVector.fromMemorySegment(I128x, seg, r1 + 2L * i + 16, LE);
            e0 = ((DoubleVector) w0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xe0, e0);
            o0 = ((DoubleVector) w0.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xo0, o0);
            e1 = ((DoubleVector) w1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xe1, e1);
            o1 = ((DoubleVector) w1.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xo1, o1);
            f0 = ((DoubleVector) v0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xe0, f0);
            p0 = ((DoubleVector) v0.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xo0, p0);
            f1 = ((DoubleVector) v1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xe1, f1);
            p1 = ((DoubleVector) v1.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(xo1, p1);
        }
        e0.intoArray(t, 0);
        o0.intoArray(t, 4);
        e1.intoArray(t, 8);
        o1.intoArray(t, 12);
        y[yIndex] = (float) bf16Tail(tree(t), seg, r0, xd, 0, i, in);
        f0.intoArray(t, 0);
        p0.intoArray(t, 4);
        f1.intoArray(t, 8);
        p1.intoArray(t, 12);
        y[yIndex + 1] = (float) bf16Tail(tree(t), seg, r1, xd, 0, i, in);
    }

    /** One bf16 row for one token (x at xOff), result to y[yIndex]. */
    private static void bf16Row(float[] y, int yIndex, double[] xd, double[] xp, int xOff, MemorySegment seg, long r0, int in, double[] t) {
        DoubleVector e0 = DoubleVector.zero(D), o0 = e0, e1 = e0, o1 = e0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            IntVector w0 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i, LE), w1 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i + 16, LE);
            e0 = ((DoubleVector) w0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(DoubleVector.fromArray(D, xp, xOff + i), e0);
            o0 = ((DoubleVector) w0.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(DoubleVector.fromArray(D, xp, xOff + i + 4), o0);
            e1 = ((DoubleVector) w1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(DoubleVector.fromArray(D, xp, xOff + i + 8), e1);
            o1 = ((DoubleVector) w1.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0)).fma(DoubleVector.fromArray(D, xp, xOff + i + 12), o1);
        }
        e0.intoArray(t, 0);
        o0.intoArray(t, 4);
        e1.intoArray(t, 8);
        o1.intoArray(t, 12);
        y[yIndex] = (float) bf16Tail(tree(t), seg, r0, xd, xOff, i, in);
    }

    private static void bf16Tokens(float[] y, double[] xd, double[] xp, int tokens, MemorySegment seg, int in, int out, int first, int from, int to) {
        double[] t = new double[16];
        int quads = tokens & ~3;
        if (quads > 0) bf16Quads(y, xd, xp, quads, seg, in, out, first, from, to, t);
        // the T mod 4 left, one token at a time (at most three more passes over each row, from L1)
        for (int o = from; o < to; o++) {
            for (int tk = quads; tk < tokens; tk++) bf16Row(y, tk * out + first + o, xd, xp, tk * in, seg, 2L * in * o, in, t);
        }
    }

    /** Rows per block of the batched kernel: a block's weights (ROWS x cols bf16) stay in L2 while every quad of tokens passes. */
    static final int QUAD_ROWS = 32;
    /** Columns per panel: one quad's x panel (4 x PANEL doubles, 16 KB) stays in L1 while every row of the block passes. */
    static final int QUAD_PANEL = 512;

    /**
     * Tokens 0..quads−1 (a multiple of 4) of rows from..to, four tokens per pass so each 16-element block is widened
     * once for four tokens (the widening is most of a row's work). Blocked for the caches: the rows in blocks of
     * {@link #QUAD_ROWS}, the columns in panels of {@link #QUAD_PANEL}; each (row, token) keeps its four
     * accumulator vectors in {@code acc} between panels. Panels split at multiples of 16, so every accumulator still
     * adds exactly the elements i ≡ l (mod 16) in increasing i: the one-token kernel's sums, bit for bit.
     */
    private static void bf16Quads(float[] y, double[] xd, double[] xp, int quads, MemorySegment seg, int in, int out, int first, int from, int to, double[] t) {
        int full = in & ~15;
        double[] acc = new double[QUAD_ROWS * 64];
        for (int rb = from; rb < to; rb += QUAD_ROWS) {
            int re = Math.min(to, rb + QUAD_ROWS);
            for (int tk = 0; tk < quads; tk += 4) {
                java.util.Arrays.fill(acc, 0.0);
                for (int p0 = 0; p0 < full; p0 += QUAD_PANEL) {
                    int p1 = Math.min(full, p0 + QUAD_PANEL);
                    for (int o = rb; o < re; o++) quadPanel(seg, 2L * in * o, xp, tk * in, in, p0, p1, acc, (o - rb) * 64);
                }
                for (int o = rb; o < re; o++) {
                    long r0 = 2L * in * o;
                    for (int k = 0; k < 4; k++) {
                        System.arraycopy(acc, (o - rb) * 64 + 16 * k, t, 0, 16);
                        y[(tk + k) * out + first + o] = (float) bf16Tail(tree(t), seg, r0, xd, (tk + k) * in, full, in);
                    }
                }
            }
        }
    }

    /** Columns p0..p1 of the row at r0 for the four tokens whose x starts at xa, continuing the accumulators acc[ao .. ao+64). */
    private static void quadPanel(MemorySegment seg, long r0, double[] xp, int xa, int in, int p0, int p1, double[] acc, int ao) {
        int xb = xa + in, xc = xb + in, xe = xc + in;
        DoubleVector a0 = DoubleVector.fromArray(D, acc, ao), a1 = DoubleVector.fromArray(D, acc, ao + 4);
        DoubleVector a2 = DoubleVector.fromArray(D, acc, ao + 8), a3 = DoubleVector.fromArray(D, acc, ao + 12);
        DoubleVector b0 = DoubleVector.fromArray(D, acc, ao + 16), b1 = DoubleVector.fromArray(D, acc, ao + 20);
        DoubleVector b2 = DoubleVector.fromArray(D, acc, ao + 24), b3 = DoubleVector.fromArray(D, acc, ao + 28);
        DoubleVector c0 = DoubleVector.fromArray(D, acc, ao + 32), c1 = DoubleVector.fromArray(D, acc, ao + 36);
        DoubleVector c2 = DoubleVector.fromArray(D, acc, ao + 40), c3 = DoubleVector.fromArray(D, acc, ao + 44);
        DoubleVector d0 = DoubleVector.fromArray(D, acc, ao + 48), d1 = DoubleVector.fromArray(D, acc, ao + 52);
        DoubleVector d2 = DoubleVector.fromArray(D, acc, ao + 56), d3 = DoubleVector.fromArray(D, acc, ao + 60);
        for (int i = p0; i < p1; i += 16) {
            IntVector w0 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i, LE), w1 = IntVector.fromMemorySegment(I128x, seg, r0 + 2L * i + 16, LE);
            DoubleVector we0 = (DoubleVector) w0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
            DoubleVector wo0 = (DoubleVector) w0.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
            DoubleVector we1 = (DoubleVector) w1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
            DoubleVector wo1 = (DoubleVector) w1.and(0xFFFF0000).reinterpretAsFloats().convertShape(VectorOperators.F2D, D, 0);
            a0 = we0.fma(DoubleVector.fromArray(D, xp, xa + i), a0);
            a1 = wo0.fma(DoubleVector.fromArray(D, xp, xa + i + 4), a1);
            a2 = we1.fma(DoubleVector.fromArray(D, xp, xa + i + 8), a2);
            a3 = wo1.fma(DoubleVector.fromArray(D, xp, xa + i + 12), a3);
            b0 = we0.fma(DoubleVector.fromArray(D, xp, xb + i), b0);
            b1 = wo0.fma(DoubleVector.fromArray(D, xp, xb + i + 4), b1);
            b2 = we1.fma(DoubleVector.fromArray(D, xp, xb + i + 8), b2);
            b3 = wo1.fma(DoubleVector.fromArray(D, xp, xb + i + 12), b3);
            c0 = we0.fma(DoubleVector.fromArray(D, xp, xc + i), c0);
            c1 = wo0.fma(DoubleVector.fromArray(D, xp, xc + i + 4), c1);
            c2 = we1.fma(DoubleVector.fromArray(D, xp, xc + i + 8), c2);
            c3 = wo1.fma(DoubleVector.fromArray(D, xp, xc + i + 12), c3);
            d0 = we0.fma(DoubleVector.fromArray(D, xp, xe + i), d0);
            d1 = wo0.fma(DoubleVector.fromArray(D, xp, xe + i + 4), d1);
            d2 = we1.fma(DoubleVector.fromArray(D, xp, xe + i + 8), d2);
            d3 = wo1.fma(DoubleVector.fromArray(D, xp, xe + i + 12), d3);
        }
        a0.intoArray(acc, ao);
        a1.intoArray(acc, ao + 4);
        a2.intoArray(acc, ao + 8);
        a3.intoArray(acc, ao + 12);
        b0.intoArray(acc, ao + 16);
        b1.intoArray(acc, ao + 20);
        b2.intoArray(acc, ao + 24);
        b3.intoArray(acc, ao + 28);
        c0.intoArray(acc, ao + 32);
        c1.intoArray(acc, ao + 36);
        c2.intoArray(acc, ao + 40);
        c3.intoArray(acc, ao + 44);
        d0.intoArray(acc, ao + 48);
        d1.intoArray(acc, ao + 52);
        d2.intoArray(acc, ao + 56);
        d3.intoArray(acc, ao + 60);
    }

    private static void f32Rows(float[] y, double[] xd, int tokens, MemorySegment seg, int in, int out, int first, int from, int to) {
        double[] lanes = new double[4];
        for (int o = from; o < to; o++) {
            for (int t = 0; t < tokens; t++) y[t * out + first + o] = (float) f32Row(seg, 4L * in * o, xd, t * in, in, lanes);
        }
    }

    /** One float32 row (at byte r0) times one token's x (at xa): the contract's sum, before the rounding to float. */
    private static double f32Row(MemorySegment seg, long r0, double[] xd, int xa, int in, double[] lanes) {
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
        return acc;
    }
}
