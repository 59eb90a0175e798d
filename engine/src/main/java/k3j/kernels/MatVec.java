package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Dense products y[t] = W x[t] for bf16 and float32 weights (docs/fp-contract.md §2 "Dense matvec", v2, docs/semantics.md
 * §3.3): per output row sixteen float accumulators a[l] over full blocks of 16 (l = i mod 16), a[l] = fma(w[i], x[i], a[l]);
 * the fixed tree b[l] = a[l] + a[l+8], c[l] = b[l] + b[l+4], acc = (c0 + c2) + (c1 + c3); then the in mod 16 tail
 * acc = fma(w[i], x[i], acc) in increasing i; y = acc.
 *
 * <p>Fast path: the sixteen accumulators are two 256-bit FloatVectors. f32: A0 = a[0..7], A1 = a[8..15]. bf16: one
 * 256-bit load of 16 bf16 gives the even elements as {@code int << 16} and the odd ones as {@code int & 0xFFFF0000}, so
 * E = a[0], a[2] … a[14] and O = a[1], a[3] … a[15], against x stored in that lane order. No reduceLanes (unspecified
 * order): the tree is taken in scalar from the stored lanes. Two rows in flight for one token; one row and four
 * tokens in flight for a batch (then one at a time), so a weight block is read once for four tokens.
 *
 * <p>On a machine with 512-bit vectors ({@link KernelPath#wide()}): the sixteen accumulators are one FloatVector in
 * natural order (a[l] in lane l), 16 bf16 widened by one sign-extending conversion and a shift, x as given; one token
 * keeps four rows in flight (four independent FMA chains, four weight streams), a batch runs {@link Tiles} (four rows
 * x six tokens per register tile). Same elements, accumulators and order: same bits.
 */
public final class MatVec {
    private MatVec() {}

    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_256;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    static final VectorSpecies<Float> F16 = FloatVector.SPECIES_512;
    static final VectorSpecies<Integer> I16 = IntVector.SPECIES_512;
    static final VectorSpecies<Short> S16 = ShortVector.SPECIES_256;

    // ------------------------------------------------------------------ reference path

    /** Reference: y[tokens][rows] = W x[tokens][cols], one row at a time, exactly as the contract reads. */
    public static void reference(float[] y, float[] x, int tokens, Matrix w) {
        int in = w.cols(), out = w.rows();
        checkShapes(y, x, tokens, w);
        float[] a = new float[16];
        for (int t = 0; t < tokens; t++) {
            for (int o = 0; o < out; o++) {
                java.util.Arrays.fill(a, 0.0f);
                int i = 0;
                for (; i + 16 <= in; i += 16) {
                    for (int l = 0; l < 16; l++) a[l] = Math.fma(w.get(o, i + l), x[t * in + i + l], a[l]);
                }
                float acc = tree(a);
                for (; i < in; i++) acc = Math.fma(w.get(o, i), x[t * in + i], acc);
                y[t * out + o] = acc;
            }
        }
    }

    /** The contract's tree over the sixteen accumulators a[0..15]. */
    public static float tree(float[] a) {
        float c0 = (a[0] + a[8]) + (a[4] + a[12]);
        float c1 = (a[1] + a[9]) + (a[5] + a[13]);
        float c2 = (a[2] + a[10]) + (a[6] + a[14]);
        float c3 = (a[3] + a[11]) + (a[7] + a[15]);
        return (c0 + c2) + (c1 + c3);
    }

    /**
     * The contract's tree from the two lane-ordered accumulators stored in t[0..15]
     * (t = [a0 a2 a4 … a14 | a1 a3 a5 … a15]): the bf16 and MXFP4 fast paths' storage order.
     */
    static float treeLaneOrder(float[] t) {
        float c0 = (t[0] + t[4]) + (t[2] + t[6]);
        float c1 = (t[8] + t[12]) + (t[10] + t[14]);
        float c2 = (t[1] + t[5]) + (t[3] + t[7]);
        float c3 = (t[9] + t[13]) + (t[11] + t[15]);
        return (c0 + c2) + (c1 + c3);
    }

    // ------------------------------------------------------------------ scalar path

    /**
     * The contract's order with the sixteen accumulators in locals: what small matrices run (no Vector API
     * warm-up, no per-call set-up), bit-identical to {@link #reference}.
     */
    static void scalar(float[] y, float[] x, int tokens, Matrix w) {
        int in = w.cols(), out = w.rows();
        // several rows per bulk copy (Matrix.rows): a copy's set-up is a call chain too until C2 compiles it
        int per = Math.max(1, Math.min(out, 8192 / in));
        short[] hb = new short[w.type() == WeightType.BF16 ? per * in : 0];
        float[] fb = new float[per * in];
        for (int o0 = 0; o0 < out; o0 += per) {
            int n = Math.min(per, out - o0);
            w.rows(o0, n, fb, hb);
            for (int k = 0; k < n; k++) {
                for (int t = 0; t < tokens; t++) y[t * out + o0 + k] = row(fb, k * in, x, t * in, in);
            }
        }
    }

    /** One row w[wo .. wo+in) times x[xo .. xo+in) in the contract's order. */
    static float row(float[] w, int wo, float[] x, int xo, int in) {
        return row(w, wo, x, xo, in, null);
    }

    /**
     * The same, skipping every element whose MXFP4 group (of {@link Mxfp4#GROUP}) has scale byte 255 in {@code scales}
     * (null: none): the MXFP4 scalar path over a dequantised row. Skipped, never multiplied by zero: 0 · Inf is NaN.
     */
    static float row(float[] w, int wo, float[] x, int xo, int in, byte[] scales) {
        float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
        float a8 = 0, a9 = 0, a10 = 0, a11 = 0, a12 = 0, a13 = 0, a14 = 0, a15 = 0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            if (scales != null && (scales[i / Mxfp4.GROUP] & 0xFF) == 255) continue;
            int wi = wo + i, xi = xo + i;
            a0 = Math.fma(w[wi], x[xi], a0);
            a1 = Math.fma(w[wi + 1], x[xi + 1], a1);
            a2 = Math.fma(w[wi + 2], x[xi + 2], a2);
            a3 = Math.fma(w[wi + 3], x[xi + 3], a3);
            a4 = Math.fma(w[wi + 4], x[xi + 4], a4);
            a5 = Math.fma(w[wi + 5], x[xi + 5], a5);
            a6 = Math.fma(w[wi + 6], x[xi + 6], a6);
            a7 = Math.fma(w[wi + 7], x[xi + 7], a7);
            a8 = Math.fma(w[wi + 8], x[xi + 8], a8);
            a9 = Math.fma(w[wi + 9], x[xi + 9], a9);
            a10 = Math.fma(w[wi + 10], x[xi + 10], a10);
            a11 = Math.fma(w[wi + 11], x[xi + 11], a11);
            a12 = Math.fma(w[wi + 12], x[xi + 12], a12);
            a13 = Math.fma(w[wi + 13], x[xi + 13], a13);
            a14 = Math.fma(w[wi + 14], x[xi + 14], a14);
            a15 = Math.fma(w[wi + 15], x[xi + 15], a15);
        }
        float c0 = (a0 + a8) + (a4 + a12), c1 = (a1 + a9) + (a5 + a13), c2 = (a2 + a10) + (a6 + a14), c3 = (a3 + a11) + (a7 + a15);
        float acc = (c0 + c2) + (c1 + c3);
        for (; i < in; i++) if (scales == null || (scales[i / Mxfp4.GROUP] & 0xFF) != 255) acc = Math.fma(w[wo + i], x[xo + i], acc);
        return acc;
    }

    // ------------------------------------------------------------------ fast path

    /** Fast: y[tokens][rows] = W x[tokens][cols], bit-identical to {@link #reference}. */
    public static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w) {
        matmul(workers, y, x, tokens, w, 1L << 30);
    }

    /** {@link #matmul} with the rows processed in slices of at most {@code sliceBytes} (tests pin that slicing keeps the bits). */
    static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w, long sliceBytes) {
        matmul(workers, y, x, tokens, w, sliceBytes, KernelPath.wide());
    }

    /** {@link #matmul} on the 512-bit kernels ({@code wide}) or the 256-bit ones (tests run both). */
    static void matmul(Workers workers, float[] y, float[] x, int tokens, Matrix w, long sliceBytes, boolean wide) {
        checkShapes(y, x, tokens, w);
        if (!KernelPath.vector((long) tokens * w.rows() * w.cols())) {
            scalar(y, x, tokens, w);
            return;
        }
        int in = w.cols();
        float[] xp = w.type() == WeightType.BF16 && !wide ? laneOrder(x, tokens, in) : x;   // 512 bits: x in natural order
        // Rows in slices of at most 1 GiB: a segment over 2 GiB gets long-indexed bounds checks that C2 does
        // not hoist (the 2.35 GB LM head ran 1.7x slower per row than a 176 MB matrix). Rows are independent,
        // so slicing changes no bits.
        int rows = w.rows(), out = rows;
        long rowBytes = (long) in * w.type().bytes;
        int chunk = (int) Math.max(2, Math.min(rows, (sliceBytes / rowBytes) & ~1L));
        for (int c0 = 0; c0 < rows; c0 += chunk) {
            final int first = c0, n = Math.min(rows, c0 + chunk) - c0;
            final MemorySegment part = w.data().asSlice(rowBytes * c0, rowBytes * n);
            workers.split(n, wide ? 4 : 2, (from, to) -> rows(y, x, xp, tokens, part, w.type(), in, out, first, from, to, wide));
        }
    }

    /** Rows from..to of the matrix part (whose row 0 is output row {@code first}) for every token, on the path for its type and width. */
    private static void rows(float[] y, float[] x, float[] xp, int tokens, MemorySegment part, WeightType type, int in, int out,
                             int first, int from, int to, boolean wide) {
        if (type == WeightType.BF16) {
            if (wide && tokens == 1) bf16OneToken512(y, x, part, in, first, from, to);
            else if (wide) Tiles.bf16(y, x, tokens, part, in, out, first, from, to);
            else if (tokens == 1) bf16OneToken(y, x, xp, part, in, first, from, to);
            else bf16Tokens(y, x, xp, tokens, part, in, out, first, from, to);
        } else {
            f32Rows(y, x, tokens, part, in, out, first, from, to);
        }
    }

    /**
     * ys[i] = ms[i] x for several matrices that read the same x: one pass over their rows with ONE hand-off to the
     * workers (the union of the rows is cut into chunks, so both threads finish together), x widened or lane-ordered
     * once. Each row is computed by exactly the kernel {@link #matmul} gives it, so the bits are those of separate
     * calls. Matrices of different types or widths, of 1 GiB or more, or a call the scalar path takes, run one by one.
     */
    public static void matmulAll(Workers workers, float[] x, int tokens, Matrix[] ms, float[][] ys) {
        matmulAll(workers, x, tokens, ms, ys, KernelPath.wide());
    }

    /** {@link #matmulAll} on the 512-bit kernels ({@code wide}) or the 256-bit ones (tests run both). */
    static void matmulAll(Workers workers, float[] x, int tokens, Matrix[] ms, float[][] ys, boolean wide) {
        if (ms.length != ys.length) throw new IllegalArgumentException(ms.length + " matrices, " + ys.length + " outputs");
        int in = ms[0].cols();
        boolean together = true;
        int[] start = new int[ms.length + 1];
        for (int i = 0; i < ms.length; i++) {
            Matrix m = ms[i];
            checkShapes(ys[i], x, tokens, m);
            together &= m.cols() == in && m.type() == ms[0].type() && KernelPath.vector((long) tokens * m.rows() * in)
                    && (long) m.rows() * in * m.type().bytes < (1L << 30);
            start[i + 1] = start[i] + m.rows();
        }
        if (!together) {
            for (int i = 0; i < ms.length; i++) matmul(workers, ys[i], x, tokens, ms[i], 1L << 30, wide);
            return;
        }
        float[] xp = ms[0].type() == WeightType.BF16 && !wide ? laneOrder(x, tokens, in) : x;
        workers.split(start[ms.length], wide ? 4 : 2, (from, to) -> {
            for (int i = 0; i < ms.length; i++) {
                int a = Math.max(from, start[i]), b = Math.min(to, start[i + 1]);
                if (a < b) rows(ys[i], x, xp, tokens, ms[i].data(), ms[i].type(), in, ms[i].rows(), 0, a - start[i], b - start[i], wide);
            }
        });
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
    static float bf16Tail(float acc, MemorySegment seg, long rowByte, float[] x, int xOff, int i, int in) {
        for (; i < in; i++) acc = Math.fma(Fp.bf16(seg.get(Matrix.BF16, rowByte + 2L * i)), x[xOff + i], acc);
        return acc;
    }

    /**
     * x in the fast path's lane order: per full block of 16, [x0 x2 … x14 | x1 x3 … x15], because one 256-bit load
     * of 16 bf16 gives the even elements (int << 16) and the odd ones (int & 0xFFFF0000) without any shuffle. Lane
     * order is storage only: accumulator a[l] still sums exactly the elements i ≡ l (mod 16), in block order.
     */
    static float[] laneOrder(float[] x, int tokens, int in) {
        float[] xp = new float[tokens * in];
        for (int t = 0; t < tokens; t++) {
            int b = t * in, i = 0;
            for (; i + 16 <= in; i += 16) {
                for (int k = 0; k < 8; k++) {
                    xp[b + i + k] = x[b + i + 2 * k];
                    xp[b + i + 8 + k] = x[b + i + 2 * k + 1];
                }
            }
            for (; i < in; i++) xp[b + i] = x[b + i];
        }
        return xp;
    }

    private static void bf16OneToken(float[] y, float[] x, float[] xp, MemorySegment seg, int in, int first, int from, int to) {
        float[] t = new float[16];
        int o = from;
        for (; o + 2 <= to; o += 2) bf16Pair(y, first + o, x, xp, seg, 2L * in * o, in, t);
        for (; o < to; o++) bf16Row(y, first + o, x, xp, 0, seg, 2L * in * o, in, t);
    }

    private static void bf16OneToken512(float[] y, float[] x, MemorySegment seg, int in, int first, int from, int to) {
        float[] t = new float[16];
        int o = from;
        for (; o + 4 <= to; o += 4) bf16Quad512(y, first + o, x, seg, 2L * in * o, in, t);
        for (; o < to; o++) bf16Row512(y, first + o, x, seg, 2L * in * o, in, t);
    }

    /** Four adjacent bf16 rows (the first at byte r0) for one token on 512-bit vectors, results to y[yIndex .. yIndex+4). */
    private static void bf16Quad512(float[] y, int yIndex, float[] x, MemorySegment seg, long r0, int in, float[] t) {
        long rb = 2L * in;
        FloatVector a0 = FloatVector.zero(F16), a1 = a0, a2 = a0, a3 = a0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            FloatVector xv = FloatVector.fromArray(F16, x, i);
            long b = r0 + 2L * i;
            // sign-extended, then shifted up: the bf16 bits become the float's high half exactly
            a0 = ((IntVector) ShortVector.fromMemorySegment(S16, seg, b, LE).convertShape(VectorOperators.S2I, I16, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xv, a0);
            a1 = ((IntVector) ShortVector.fromMemorySegment(S16, seg, b + rb, LE).convertShape(VectorOperators.S2I, I16, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xv, a1);
            a2 = ((IntVector) ShortVector.fromMemorySegment(S16, seg, b + 2 * rb, LE).convertShape(VectorOperators.S2I, I16, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xv, a2);
            a3 = ((IntVector) ShortVector.fromMemorySegment(S16, seg, b + 3 * rb, LE).convertShape(VectorOperators.S2I, I16, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xv, a3);
        }
        a0.intoArray(t, 0);
        y[yIndex] = bf16Tail(tree(t), seg, r0, x, 0, i, in);
        a1.intoArray(t, 0);
        y[yIndex + 1] = bf16Tail(tree(t), seg, r0 + rb, x, 0, i, in);
        a2.intoArray(t, 0);
        y[yIndex + 2] = bf16Tail(tree(t), seg, r0 + 2 * rb, x, 0, i, in);
        a3.intoArray(t, 0);
        y[yIndex + 3] = bf16Tail(tree(t), seg, r0 + 3 * rb, x, 0, i, in);
    }

    /** One bf16 row for one token on 512-bit vectors, result to y[yIndex]. */
    private static void bf16Row512(float[] y, int yIndex, float[] x, MemorySegment seg, long r0, int in, float[] t) {
        FloatVector a0 = FloatVector.zero(F16);
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            a0 = ((IntVector) ShortVector.fromMemorySegment(S16, seg, r0 + 2L * i, LE).convertShape(VectorOperators.S2I, I16, 0))
                    .lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(FloatVector.fromArray(F16, x, i), a0);
        }
        a0.intoArray(t, 0);
        y[yIndex] = bf16Tail(tree(t), seg, r0, x, 0, i, in);
    }

    /** Two adjacent bf16 rows (the first at byte r0) for one token, results to y[yIndex] and y[yIndex + 1]. */
    private static void bf16Pair(float[] y, int yIndex, float[] x, float[] xp, MemorySegment seg, long r0, int in, float[] t) {
        long r1 = r0 + 2L * in;
        FloatVector e0 = FloatVector.zero(F), o0 = e0, e1 = e0, o1 = e0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            FloatVector xe = FloatVector.fromArray(F, xp, i), xo = FloatVector.fromArray(F, xp, i + 8);
            IntVector w0 = IntVector.fromMemorySegment(I, seg, r0 + 2L * i, LE), w1 = IntVector.fromMemorySegment(I, seg, r1 + 2L * i, LE);
            e0 = w0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xe, e0);
            o0 = w0.and(0xFFFF0000).reinterpretAsFloats().fma(xo, o0);
            e1 = w1.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(xe, e1);
            o1 = w1.and(0xFFFF0000).reinterpretAsFloats().fma(xo, o1);
        }
        e0.intoArray(t, 0);
        o0.intoArray(t, 8);
        y[yIndex] = bf16Tail(treeLaneOrder(t), seg, r0, x, 0, i, in);
        e1.intoArray(t, 0);
        o1.intoArray(t, 8);
        y[yIndex + 1] = bf16Tail(treeLaneOrder(t), seg, r1, x, 0, i, in);
    }

    /** One bf16 row for one token (x at xOff), result to y[yIndex]. */
    private static void bf16Row(float[] y, int yIndex, float[] x, float[] xp, int xOff, MemorySegment seg, long r0, int in, float[] t) {
        FloatVector e0 = FloatVector.zero(F), o0 = e0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            IntVector w0 = IntVector.fromMemorySegment(I, seg, r0 + 2L * i, LE);
            e0 = w0.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats().fma(FloatVector.fromArray(F, xp, xOff + i), e0);
            o0 = w0.and(0xFFFF0000).reinterpretAsFloats().fma(FloatVector.fromArray(F, xp, xOff + i + 8), o0);
        }
        e0.intoArray(t, 0);
        o0.intoArray(t, 8);
        y[yIndex] = bf16Tail(treeLaneOrder(t), seg, r0, x, xOff, i, in);
    }

    private static void bf16Tokens(float[] y, float[] x, float[] xp, int tokens, MemorySegment seg, int in, int out, int first, int from, int to) {
        float[] t = new float[16];
        int quads = tokens & ~3;
        if (quads > 0) bf16Quads(y, x, xp, quads, seg, in, out, first, from, to, t);
        // the T mod 4 left, one token at a time (at most three more passes over each row, from L1)
        for (int o = from; o < to; o++) {
            for (int tk = quads; tk < tokens; tk++) bf16Row(y, tk * out + first + o, x, xp, tk * in, seg, 2L * in * o, in, t);
        }
    }

    /** Rows per block of the batched kernel: a block's weights (ROWS x cols bf16) stay in L2 while every quad of tokens passes. */
    static final int QUAD_ROWS = 32;
    /** Columns per panel: one quad's x panel (4 x PANEL floats, 8 KB) stays in L1 while every row of the block passes. */
    static final int QUAD_PANEL = 512;

    /**
     * Tokens 0..quads−1 (a multiple of 4) of rows from..to, four tokens per pass so each 16-element block is loaded
     * and split once for four tokens. Blocked for the caches: the rows in blocks of {@link #QUAD_ROWS}, the columns in
     * panels of {@link #QUAD_PANEL}; each (row, token) keeps its two accumulator vectors in {@code acc} between
     * panels. Panels split at multiples of 16, so every accumulator still adds exactly the elements i ≡ l (mod 16) in
     * increasing i: the one-token kernel's sums, bit for bit.
     */
    private static void bf16Quads(float[] y, float[] x, float[] xp, int quads, MemorySegment seg, int in, int out, int first, int from, int to, float[] t) {
        int full = in & ~15;
        float[] acc = new float[QUAD_ROWS * 64];
        for (int rb = from; rb < to; rb += QUAD_ROWS) {
            int re = Math.min(to, rb + QUAD_ROWS);
            for (int tk = 0; tk < quads; tk += 4) {
                java.util.Arrays.fill(acc, 0.0f);
                for (int p0 = 0; p0 < full; p0 += QUAD_PANEL) {
                    int p1 = Math.min(full, p0 + QUAD_PANEL);
                    for (int o = rb; o < re; o++) quadPanel(seg, 2L * in * o, xp, tk * in, in, p0, p1, acc, (o - rb) * 64);
                }
                for (int o = rb; o < re; o++) {
                    long r0 = 2L * in * o;
                    for (int k = 0; k < 4; k++) {
                        System.arraycopy(acc, (o - rb) * 64 + 16 * k, t, 0, 16);
                        y[(tk + k) * out + first + o] = bf16Tail(treeLaneOrder(t), seg, r0, x, (tk + k) * in, full, in);
                    }
                }
            }
        }
    }

    /** Columns p0..p1 of the row at r0 for the four tokens whose x starts at xa, continuing the accumulators acc[ao .. ao+64). */
    private static void quadPanel(MemorySegment seg, long r0, float[] xp, int xa, int in, int p0, int p1, float[] acc, int ao) {
        int xb = xa + in, xc = xb + in, xd = xc + in;
        FloatVector a0 = FloatVector.fromArray(F, acc, ao), a1 = FloatVector.fromArray(F, acc, ao + 8);
        FloatVector b0 = FloatVector.fromArray(F, acc, ao + 16), b1 = FloatVector.fromArray(F, acc, ao + 24);
        FloatVector c0 = FloatVector.fromArray(F, acc, ao + 32), c1 = FloatVector.fromArray(F, acc, ao + 40);
        FloatVector d0 = FloatVector.fromArray(F, acc, ao + 48), d1 = FloatVector.fromArray(F, acc, ao + 56);
        for (int i = p0; i < p1; i += 16) {
            IntVector w = IntVector.fromMemorySegment(I, seg, r0 + 2L * i, LE);
            FloatVector we = w.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector wo = w.and(0xFFFF0000).reinterpretAsFloats();
            a0 = we.fma(FloatVector.fromArray(F, xp, xa + i), a0);
            a1 = wo.fma(FloatVector.fromArray(F, xp, xa + i + 8), a1);
            b0 = we.fma(FloatVector.fromArray(F, xp, xb + i), b0);
            b1 = wo.fma(FloatVector.fromArray(F, xp, xb + i + 8), b1);
            c0 = we.fma(FloatVector.fromArray(F, xp, xc + i), c0);
            c1 = wo.fma(FloatVector.fromArray(F, xp, xc + i + 8), c1);
            d0 = we.fma(FloatVector.fromArray(F, xp, xd + i), d0);
            d1 = wo.fma(FloatVector.fromArray(F, xp, xd + i + 8), d1);
        }
        a0.intoArray(acc, ao);
        a1.intoArray(acc, ao + 8);
        b0.intoArray(acc, ao + 16);
        b1.intoArray(acc, ao + 24);
        c0.intoArray(acc, ao + 32);
        c1.intoArray(acc, ao + 40);
        d0.intoArray(acc, ao + 48);
        d1.intoArray(acc, ao + 56);
    }

    private static void f32Rows(float[] y, float[] x, int tokens, MemorySegment seg, int in, int out, int first, int from, int to) {
        float[] t = new float[16];
        for (int o = from; o < to; o++) {
            for (int tk = 0; tk < tokens; tk++) y[tk * out + first + o] = f32Row(seg, 4L * in * o, x, tk * in, in, t);
        }
    }

    /** One float32 row (at byte r0) times one token's x (at xa), in the contract's order. */
    private static float f32Row(MemorySegment seg, long r0, float[] x, int xa, int in, float[] t) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        int i = 0;
        for (; i + 16 <= in; i += 16) {
            long b0 = r0 + 4L * i;
            a0 = FloatVector.fromMemorySegment(F, seg, b0, LE).fma(FloatVector.fromArray(F, x, xa + i), a0);
            a1 = FloatVector.fromMemorySegment(F, seg, b0 + 32, LE).fma(FloatVector.fromArray(F, x, xa + i + 8), a1);
        }
        a0.intoArray(t, 0);
        a1.intoArray(t, 8);
        float acc = tree(t);
        for (; i < in; i++) acc = Math.fma(seg.get(Matrix.F32, r0 + 4L * i), x[xa + i], acc);
        return acc;
    }
}
