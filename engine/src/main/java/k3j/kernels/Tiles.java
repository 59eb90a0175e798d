package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The batched (several-token) dense products on 512-bit vectors (docs/fp-contract.md §2 "Dense matvec", batched):
 * a (row, token) pair's sixteen accumulators a[0..15] are ONE FloatVector512, lane l = a[l], and a register tile of
 * four rows x six tokens keeps 24 of them while each 16-element block of the four rows is loaded (and, for bf16,
 * widened) once for six tokens. Every accumulator still adds exactly the elements i ≡ l (mod 16) by FMA in increasing
 * i; the tree and the tail are the one-token kernel's, so a batch equals T single calls bit for bit.
 *
 * <p>Blocked for the caches: the rows in blocks of {@link #BLOCK}, the columns in panels of {@link #PANEL} (multiples
 * of 16, so splitting changes no sum), the tokens in chunks of {@link #CHUNK}; the accumulators of each (row, token)
 * wait in memory between panels. A six-token x panel (24 KB) stays in L1 while every tile of the block passes.
 */
final class Tiles {
    private Tiles() {}

    static final VectorSpecies<Float> W = FloatVector.SPECIES_512;
    static final VectorSpecies<Integer> WI = IntVector.SPECIES_512;
    static final VectorSpecies<Short> S = ShortVector.SPECIES_256;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** Rows per block: its weight panel (64 x 1024 bf16, 128 KB) stays in L2 while every group of tokens passes. */
    static final int BLOCK = 64;
    /** Columns per panel. */
    static final int PANEL = 1024;
    /** Tokens per chunk: bounds the accumulators waiting between panels (BLOCK x CHUNK x 64 B = 240 KB). */
    static final int CHUNK = 60;

    /**
     * y[t][first + o] = row o of the bf16 matrix seg (rows of in elements) times x[t] (natural order), for rows
     * from..to and every token; rows in tiles of four, tokens in groups of six, the rest four rows x one token or
     * one x one.
     */
    static void bf16(float[] y, float[] x, int tokens, MemorySegment seg, int in, int out, int first, int from, int to) {
        int full = in & ~15;
        long rowBytes = 2L * in;
        float[] acc = new float[BLOCK * Math.min(tokens, CHUNK) * 16], t = new float[16];
        for (int c0 = 0; c0 < tokens; c0 += CHUNK) {
            int c1 = Math.min(tokens, c0 + CHUNK), rs = (c1 - c0) * 16;
            for (int rb = from; rb < to; rb += BLOCK) {
                int re = Math.min(to, rb + BLOCK), quads = rb + (re - rb & ~3);
                java.util.Arrays.fill(acc, 0.0f);
                for (int p0 = 0; p0 < full; p0 += PANEL) {
                    int p1 = Math.min(full, p0 + PANEL), tk = c0;
                    for (; tk + 6 <= c1; tk += 6) {
                        for (int o = rb; o < quads; o += 4) bf16Tile4x6(seg, rowBytes * o, rowBytes, x, tk * in, in, p0, p1, acc, (o - rb) * rs + 16 * (tk - c0), rs);
                    }
                    for (; tk < c1; tk++) {
                        for (int o = rb; o < quads; o += 4) bf16Tile4x1(seg, rowBytes * o, rowBytes, x, tk * in, in, p0, p1, acc, (o - rb) * rs + 16 * (tk - c0), rs);
                    }
                    for (int o = quads; o < re; o++) {
                        for (tk = c0; tk < c1; tk++) bf16Tile1x1(seg, rowBytes * o, rowBytes, x, tk * in, in, p0, p1, acc, (o - rb) * rs + 16 * (tk - c0), rs);
                    }
                }
                for (int o = rb; o < re; o++) {
                    for (int tk = c0; tk < c1; tk++) {
                        System.arraycopy(acc, (o - rb) * rs + 16 * (tk - c0), t, 0, 16);
                        y[tk * out + first + o] = MatVec.bf16Tail(MatVec.tree(t), seg, rowBytes * o, x, tk * in, full, in);
                    }
                }
            }
        }
    }

    /**
     * Staged float rows (four, ws apart from w[wo], in the order x is given in) times tokens 0..tokens−1 of x, their
     * full blocks' accumulators into acc (row j, token k at j·rs + 16k, rs = 16·tokens), which the caller zeroes.
     */
    static void staged4(float[] w, int wo, int ws, float[] x, int tokens, int in, float[] acc) {
        int full = in & ~15, rs = 16 * tokens;
        for (int p0 = 0; p0 < full; p0 += PANEL) {
            int p1 = Math.min(full, p0 + PANEL), tk = 0;
            for (; tk + 6 <= tokens; tk += 6) f32Tile4x6(w, wo, ws, x, tk * in, in, p0, p1, acc, 16 * tk, rs);
            for (; tk < tokens; tk++) f32Tile4x1(w, wo, ws, x, tk * in, in, p0, p1, acc, 16 * tk, rs);
        }
    }

    /** 4 rows x 6 tokens, columns p0..p1: rows at bytes r0, r0 + rowBytes, … (bf16, widened in register); x of token k at xa + k·in; accumulators of (row j, token k) at acc[ao + j·rs + 16k]. */
    static void bf16Tile4x6(MemorySegment seg, long r0, long rowBytes, float[] x, int xa, int in, int p0, int p1, float[] acc, int ao, int rs) {
        FloatVector a00 = FloatVector.fromArray(W, acc, ao);
        FloatVector a01 = FloatVector.fromArray(W, acc, ao + 16);
        FloatVector a02 = FloatVector.fromArray(W, acc, ao + 32);
        FloatVector a03 = FloatVector.fromArray(W, acc, ao + 48);
        FloatVector a04 = FloatVector.fromArray(W, acc, ao + 64);
        FloatVector a05 = FloatVector.fromArray(W, acc, ao + 80);
        FloatVector a10 = FloatVector.fromArray(W, acc, ao + rs);
        FloatVector a11 = FloatVector.fromArray(W, acc, ao + rs + 16);
        FloatVector a12 = FloatVector.fromArray(W, acc, ao + rs + 32);
        FloatVector a13 = FloatVector.fromArray(W, acc, ao + rs + 48);
        FloatVector a14 = FloatVector.fromArray(W, acc, ao + rs + 64);
        FloatVector a15 = FloatVector.fromArray(W, acc, ao + rs + 80);
        FloatVector a20 = FloatVector.fromArray(W, acc, ao + 2 * rs);
        FloatVector a21 = FloatVector.fromArray(W, acc, ao + 2 * rs + 16);
        FloatVector a22 = FloatVector.fromArray(W, acc, ao + 2 * rs + 32);
        FloatVector a23 = FloatVector.fromArray(W, acc, ao + 2 * rs + 48);
        FloatVector a24 = FloatVector.fromArray(W, acc, ao + 2 * rs + 64);
        FloatVector a25 = FloatVector.fromArray(W, acc, ao + 2 * rs + 80);
        FloatVector a30 = FloatVector.fromArray(W, acc, ao + 3 * rs);
        FloatVector a31 = FloatVector.fromArray(W, acc, ao + 3 * rs + 16);
        FloatVector a32 = FloatVector.fromArray(W, acc, ao + 3 * rs + 32);
        FloatVector a33 = FloatVector.fromArray(W, acc, ao + 3 * rs + 48);
        FloatVector a34 = FloatVector.fromArray(W, acc, ao + 3 * rs + 64);
        FloatVector a35 = FloatVector.fromArray(W, acc, ao + 3 * rs + 80);
        for (int i = p0; i < p1; i += 16) {
            long b = r0 + 2L * i;
            FloatVector w0 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w1 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w2 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + 2 * rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w3 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + 3 * rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector x0 = FloatVector.fromArray(W, x, xa + i);
            a00 = w0.fma(x0, a00);
            a10 = w1.fma(x0, a10);
            a20 = w2.fma(x0, a20);
            a30 = w3.fma(x0, a30);
            FloatVector x1 = FloatVector.fromArray(W, x, xa + in + i);
            a01 = w0.fma(x1, a01);
            a11 = w1.fma(x1, a11);
            a21 = w2.fma(x1, a21);
            a31 = w3.fma(x1, a31);
            FloatVector x2 = FloatVector.fromArray(W, x, xa + 2 * in + i);
            a02 = w0.fma(x2, a02);
            a12 = w1.fma(x2, a12);
            a22 = w2.fma(x2, a22);
            a32 = w3.fma(x2, a32);
            FloatVector x3 = FloatVector.fromArray(W, x, xa + 3 * in + i);
            a03 = w0.fma(x3, a03);
            a13 = w1.fma(x3, a13);
            a23 = w2.fma(x3, a23);
            a33 = w3.fma(x3, a33);
            FloatVector x4 = FloatVector.fromArray(W, x, xa + 4 * in + i);
            a04 = w0.fma(x4, a04);
            a14 = w1.fma(x4, a14);
            a24 = w2.fma(x4, a24);
            a34 = w3.fma(x4, a34);
            FloatVector x5 = FloatVector.fromArray(W, x, xa + 5 * in + i);
            a05 = w0.fma(x5, a05);
            a15 = w1.fma(x5, a15);
            a25 = w2.fma(x5, a25);
            a35 = w3.fma(x5, a35);
        }
        a00.intoArray(acc, ao);
        a01.intoArray(acc, ao + 16);
        a02.intoArray(acc, ao + 32);
        a03.intoArray(acc, ao + 48);
        a04.intoArray(acc, ao + 64);
        a05.intoArray(acc, ao + 80);
        a10.intoArray(acc, ao + rs);
        a11.intoArray(acc, ao + rs + 16);
        a12.intoArray(acc, ao + rs + 32);
        a13.intoArray(acc, ao + rs + 48);
        a14.intoArray(acc, ao + rs + 64);
        a15.intoArray(acc, ao + rs + 80);
        a20.intoArray(acc, ao + 2 * rs);
        a21.intoArray(acc, ao + 2 * rs + 16);
        a22.intoArray(acc, ao + 2 * rs + 32);
        a23.intoArray(acc, ao + 2 * rs + 48);
        a24.intoArray(acc, ao + 2 * rs + 64);
        a25.intoArray(acc, ao + 2 * rs + 80);
        a30.intoArray(acc, ao + 3 * rs);
        a31.intoArray(acc, ao + 3 * rs + 16);
        a32.intoArray(acc, ao + 3 * rs + 32);
        a33.intoArray(acc, ao + 3 * rs + 48);
        a34.intoArray(acc, ao + 3 * rs + 64);
        a35.intoArray(acc, ao + 3 * rs + 80);
    }

    /** 4 rows x 1 token, columns p0..p1: rows at bytes r0, r0 + rowBytes, … (bf16, widened in register); x of token k at xa + k·in; accumulators of (row j, token k) at acc[ao + j·rs + 16k]. */
    static void bf16Tile4x1(MemorySegment seg, long r0, long rowBytes, float[] x, int xa, int in, int p0, int p1, float[] acc, int ao, int rs) {
        FloatVector a00 = FloatVector.fromArray(W, acc, ao);
        FloatVector a10 = FloatVector.fromArray(W, acc, ao + rs);
        FloatVector a20 = FloatVector.fromArray(W, acc, ao + 2 * rs);
        FloatVector a30 = FloatVector.fromArray(W, acc, ao + 3 * rs);
        for (int i = p0; i < p1; i += 16) {
            long b = r0 + 2L * i;
            FloatVector w0 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w1 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w2 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + 2 * rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector w3 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b + 3 * rowBytes, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector x0 = FloatVector.fromArray(W, x, xa + i);
            a00 = w0.fma(x0, a00);
            a10 = w1.fma(x0, a10);
            a20 = w2.fma(x0, a20);
            a30 = w3.fma(x0, a30);
        }
        a00.intoArray(acc, ao);
        a10.intoArray(acc, ao + rs);
        a20.intoArray(acc, ao + 2 * rs);
        a30.intoArray(acc, ao + 3 * rs);
    }

    /** 1 row x 1 token, columns p0..p1: rows at bytes r0, r0 + rowBytes, … (bf16, widened in register); x of token k at xa + k·in; accumulators of (row j, token k) at acc[ao + j·rs + 16k]. */
    static void bf16Tile1x1(MemorySegment seg, long r0, long rowBytes, float[] x, int xa, int in, int p0, int p1, float[] acc, int ao, int rs) {
        FloatVector a00 = FloatVector.fromArray(W, acc, ao);
        for (int i = p0; i < p1; i += 16) {
            long b = r0 + 2L * i;
            FloatVector w0 = ((IntVector) ShortVector.fromMemorySegment(S, seg, b, LE).convertShape(VectorOperators.S2I, WI, 0)).lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
            FloatVector x0 = FloatVector.fromArray(W, x, xa + i);
            a00 = w0.fma(x0, a00);
        }
        a00.intoArray(acc, ao);
    }

    /** 4 rows x 6 tokens, columns p0..p1: rows at w[wo], w[wo + ws], … (float, staged); x of token k at xa + k·in; accumulators of (row j, token k) at acc[ao + j·rs + 16k]. */
    static void f32Tile4x6(float[] w, int wo, int ws, float[] x, int xa, int in, int p0, int p1, float[] acc, int ao, int rs) {
        FloatVector a00 = FloatVector.fromArray(W, acc, ao);
        FloatVector a01 = FloatVector.fromArray(W, acc, ao + 16);
        FloatVector a02 = FloatVector.fromArray(W, acc, ao + 32);
        FloatVector a03 = FloatVector.fromArray(W, acc, ao + 48);
        FloatVector a04 = FloatVector.fromArray(W, acc, ao + 64);
        FloatVector a05 = FloatVector.fromArray(W, acc, ao + 80);
        FloatVector a10 = FloatVector.fromArray(W, acc, ao + rs);
        FloatVector a11 = FloatVector.fromArray(W, acc, ao + rs + 16);
        FloatVector a12 = FloatVector.fromArray(W, acc, ao + rs + 32);
        FloatVector a13 = FloatVector.fromArray(W, acc, ao + rs + 48);
        FloatVector a14 = FloatVector.fromArray(W, acc, ao + rs + 64);
        FloatVector a15 = FloatVector.fromArray(W, acc, ao + rs + 80);
        FloatVector a20 = FloatVector.fromArray(W, acc, ao + 2 * rs);
        FloatVector a21 = FloatVector.fromArray(W, acc, ao + 2 * rs + 16);
        FloatVector a22 = FloatVector.fromArray(W, acc, ao + 2 * rs + 32);
        FloatVector a23 = FloatVector.fromArray(W, acc, ao + 2 * rs + 48);
        FloatVector a24 = FloatVector.fromArray(W, acc, ao + 2 * rs + 64);
        FloatVector a25 = FloatVector.fromArray(W, acc, ao + 2 * rs + 80);
        FloatVector a30 = FloatVector.fromArray(W, acc, ao + 3 * rs);
        FloatVector a31 = FloatVector.fromArray(W, acc, ao + 3 * rs + 16);
        FloatVector a32 = FloatVector.fromArray(W, acc, ao + 3 * rs + 32);
        FloatVector a33 = FloatVector.fromArray(W, acc, ao + 3 * rs + 48);
        FloatVector a34 = FloatVector.fromArray(W, acc, ao + 3 * rs + 64);
        FloatVector a35 = FloatVector.fromArray(W, acc, ao + 3 * rs + 80);
        for (int i = p0; i < p1; i += 16) {
            FloatVector w0 = FloatVector.fromArray(W, w, wo + i);
            FloatVector w1 = FloatVector.fromArray(W, w, wo + ws + i);
            FloatVector w2 = FloatVector.fromArray(W, w, wo + 2 * ws + i);
            FloatVector w3 = FloatVector.fromArray(W, w, wo + 3 * ws + i);
            FloatVector x0 = FloatVector.fromArray(W, x, xa + i);
            a00 = w0.fma(x0, a00);
            a10 = w1.fma(x0, a10);
            a20 = w2.fma(x0, a20);
            a30 = w3.fma(x0, a30);
            FloatVector x1 = FloatVector.fromArray(W, x, xa + in + i);
            a01 = w0.fma(x1, a01);
            a11 = w1.fma(x1, a11);
            a21 = w2.fma(x1, a21);
            a31 = w3.fma(x1, a31);
            FloatVector x2 = FloatVector.fromArray(W, x, xa + 2 * in + i);
            a02 = w0.fma(x2, a02);
            a12 = w1.fma(x2, a12);
            a22 = w2.fma(x2, a22);
            a32 = w3.fma(x2, a32);
            FloatVector x3 = FloatVector.fromArray(W, x, xa + 3 * in + i);
            a03 = w0.fma(x3, a03);
            a13 = w1.fma(x3, a13);
            a23 = w2.fma(x3, a23);
            a33 = w3.fma(x3, a33);
            FloatVector x4 = FloatVector.fromArray(W, x, xa + 4 * in + i);
            a04 = w0.fma(x4, a04);
            a14 = w1.fma(x4, a14);
            a24 = w2.fma(x4, a24);
            a34 = w3.fma(x4, a34);
            FloatVector x5 = FloatVector.fromArray(W, x, xa + 5 * in + i);
            a05 = w0.fma(x5, a05);
            a15 = w1.fma(x5, a15);
            a25 = w2.fma(x5, a25);
            a35 = w3.fma(x5, a35);
        }
        a00.intoArray(acc, ao);
        a01.intoArray(acc, ao + 16);
        a02.intoArray(acc, ao + 32);
        a03.intoArray(acc, ao + 48);
        a04.intoArray(acc, ao + 64);
        a05.intoArray(acc, ao + 80);
        a10.intoArray(acc, ao + rs);
        a11.intoArray(acc, ao + rs + 16);
        a12.intoArray(acc, ao + rs + 32);
        a13.intoArray(acc, ao + rs + 48);
        a14.intoArray(acc, ao + rs + 64);
        a15.intoArray(acc, ao + rs + 80);
        a20.intoArray(acc, ao + 2 * rs);
        a21.intoArray(acc, ao + 2 * rs + 16);
        a22.intoArray(acc, ao + 2 * rs + 32);
        a23.intoArray(acc, ao + 2 * rs + 48);
        a24.intoArray(acc, ao + 2 * rs + 64);
        a25.intoArray(acc, ao + 2 * rs + 80);
        a30.intoArray(acc, ao + 3 * rs);
        a31.intoArray(acc, ao + 3 * rs + 16);
        a32.intoArray(acc, ao + 3 * rs + 32);
        a33.intoArray(acc, ao + 3 * rs + 48);
        a34.intoArray(acc, ao + 3 * rs + 64);
        a35.intoArray(acc, ao + 3 * rs + 80);
    }

    /** 4 rows x 1 token, columns p0..p1: rows at w[wo], w[wo + ws], … (float, staged); x of token k at xa + k·in; accumulators of (row j, token k) at acc[ao + j·rs + 16k]. */
    static void f32Tile4x1(float[] w, int wo, int ws, float[] x, int xa, int in, int p0, int p1, float[] acc, int ao, int rs) {
        FloatVector a00 = FloatVector.fromArray(W, acc, ao);
        FloatVector a10 = FloatVector.fromArray(W, acc, ao + rs);
        FloatVector a20 = FloatVector.fromArray(W, acc, ao + 2 * rs);
        FloatVector a30 = FloatVector.fromArray(W, acc, ao + 3 * rs);
        for (int i = p0; i < p1; i += 16) {
            FloatVector w0 = FloatVector.fromArray(W, w, wo + i);
            FloatVector w1 = FloatVector.fromArray(W, w, wo + ws + i);
            FloatVector w2 = FloatVector.fromArray(W, w, wo + 2 * ws + i);
            FloatVector w3 = FloatVector.fromArray(W, w, wo + 3 * ws + i);
            FloatVector x0 = FloatVector.fromArray(W, x, xa + i);
            a00 = w0.fma(x0, a00);
            a10 = w1.fma(x0, a10);
            a20 = w2.fma(x0, a20);
            a30 = w3.fma(x0, a30);
        }
        a00.intoArray(acc, ao);
        a10.intoArray(acc, ao + rs);
        a20.intoArray(acc, ao + 2 * rs);
        a30.intoArray(acc, ao + 3 * rs);
    }
}
