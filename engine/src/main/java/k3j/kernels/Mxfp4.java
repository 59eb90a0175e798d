package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * MXFP4 (OCP MX FP4, compressed-tensors mxfp4-pack-quantized) expert weights: format, dequantisation and
 * matvec (docs/fp-contract.md §2 "MXFP4", docs/semantics.md §3.4-3.5).
 *
 * <p>Packed row r = in/2 bytes; byte j holds element 2j in the LOW nibble and 2j+1 in the HIGH nibble
 * (swapping them keeps every statistic and breaks the model). One E8M0 scale byte per 32 elements:
 * 2^(b − 127); byte 255 zeroes its whole group (a deliberate choice, see the contract: OCP says NaN, only
 * corrupt data carries 255).
 *
 * <p>Matvec (fp-contract v2): the weight of element i is T_g[code] = E2M1[code] · 2^(b − 127) in float (exact: a
 * power of two), and the row is the dense matvec's sum over these weights ({@link MatVec}: sixteen float FMA
 * accumulators a[i mod 16] over the full blocks of 16, the fixed tree, then the tail by FMA), with the elements of
 * every byte-255 group skipped (never multiplied, so an Inf or NaN activation there changes nothing).
 */
public final class Mxfp4 {
    private Mxfp4() {}

    public static final int GROUP = 32;

    /** E2M1 code → value (bit 3 is the sign; code 8 is −0). */
    static final float[] E2M1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

    /** E8M0 scale byte → float 2^(b − 127) exactly (b = 0 is the subnormal 2^−127); 255 → 0 (group zeroed). */
    public static float scale(int b) {
        b &= 0xFF;
        return b == 255 ? 0.0f : Math.scalb(1.0f, b - 127);
    }

    static void checkGeometry(long packedBytes, long scaleBytes, int rows, int in) {
        if (rows <= 0 || in <= 0) throw new IllegalArgumentException("MXFP4 shape [" + rows + ", " + in + "] must be positive");
        if ((in & 1) != 0) throw new IllegalArgumentException("MXFP4 row length " + in + " must be even (two codes per byte)");
        long wantPacked = (long) rows * (in / 2), wantScales = (long) rows * groups(in);
        if (packedBytes != wantPacked) throw new IllegalArgumentException("MXFP4 packed has " + packedBytes + " bytes, [" + rows + ", " + in + "] needs " + wantPacked);
        if (scaleBytes != wantScales) throw new IllegalArgumentException("MXFP4 scales have " + scaleBytes + " bytes, [" + rows + ", " + in + "] needs " + wantScales);
    }

    public static int groups(int in) {
        return (in + GROUP - 1) / GROUP;
    }

    /** Element (r, k) of the canonical layout, dequantised (exact in float). */
    static float element(MemorySegment packed, MemorySegment scales, int in, int r, int k) {
        int b = packed.get(ValueLayout.JAVA_BYTE, (long) r * (in / 2) + k / 2) & 0xFF;
        int code = (k & 1) == 0 ? b & 15 : b >>> 4;
        return E2M1[code] * scale(scales.get(ValueLayout.JAVA_BYTE, (long) r * groups(in) + k / GROUP));
    }

    /** w[rows][in] = E2M1[code] · 2^(b − 127), exact (the fixture demands zero differing elements). */
    public static float[] dequant(MemorySegment packed, MemorySegment scales, int rows, int in) {
        checkGeometry(packed.byteSize(), scales.byteSize(), rows, in);
        float[] w = new float[rows * in];
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < in; k++) w[r * in + k] = element(packed, scales, in, r, k);
        }
        return w;
    }

    /** Dequantises from the repacked layout (proves the repack loses nothing: must equal {@link #dequant}, −0 included). */
    public static float[] dequant(Repacked w) {
        int in = w.in(), ng = groups(in);
        float[] out = new float[w.rows() * in];
        for (int r = 0; r < w.rows(); r++) {
            for (int k = 0; k < in; k++) {
                out[r * in + k] = E2M1[code(w.packed(), w.codes(), w.rowBase(r), k)] * scale(w.scales().get(ValueLayout.JAVA_BYTE, (long) r * ng + k / GROUP));
            }
        }
        return out;
    }

    // ------------------------------------------------------------------ reference path

    /** Reference: y[tokens][rows] = W x[tokens][in] over the canonical (checkpoint) layout, as the contract reads. */
    public static void reference(float[] y, float[] x, int tokens, MemorySegment packed, MemorySegment scales, int rows, int in) {
        checkGeometry(packed.byteSize(), scales.byteSize(), rows, in);
        int ng = groups(in), full = in & ~15;
        float[] a = new float[16];
        for (int t = 0; t < tokens; t++) {
            for (int r = 0; r < rows; r++) {
                java.util.Arrays.fill(a, 0.0f);
                int i = 0;
                for (; i < full; i += 16) {
                    int sb = scales.get(ValueLayout.JAVA_BYTE, (long) r * ng + i / GROUP) & 0xFF;
                    if (sb == 255) continue;
                    for (int l = 0; l < 16; l++) a[l] = Math.fma(weight(packed, r, in, i + l, sb), x[t * in + i + l], a[l]);
                }
                float acc = MatVec.tree(a);
                for (; i < in; i++) {
                    int sb = scales.get(ValueLayout.JAVA_BYTE, (long) r * ng + i / GROUP) & 0xFF;
                    if (sb != 255) acc = Math.fma(weight(packed, r, in, i, sb), x[t * in + i], acc);
                }
                y[t * rows + r] = acc;
            }
        }
    }

    /** The table entry T_g[code] = E2M1[code] · 2^(sb − 127) of element k of canonical row r (float: exact). */
    private static float weight(MemorySegment packed, int r, int in, int k, int sb) {
        int b = packed.get(ValueLayout.JAVA_BYTE, (long) r * (in / 2) + k / 2) & 0xFF;
        return E2M1[(k & 1) == 0 ? b & 15 : b >>> 4] * scale(sb);
    }

    // ------------------------------------------------------------------ repacked layout + fast path

    /**
     * How a repacked matrix stores its codes. {@link #NIBBLES}: two E2M1 codes per byte, as in the checkpoint.
     * {@link #INT8}: one code per byte, per block of 16 elements the eight even elements' codes then the eight odd
     * ones' (twice the bytes, no nibble split in the kernel). Both give the same bits (docs/fp-contract.md §2 "MXFP4").
     */
    public enum Codes {
        NIBBLES(16), INT8(32);

        /** Bytes per (row, group of 32). */
        final int groupBytes;

        Codes(int groupBytes) {
            this.groupBytes = groupBytes;
        }

        /** Parses a form name, case-insensitive: nibbles or int8. */
        public static Codes parse(String s) {
            try {
                return valueOf(s.trim().toUpperCase(java.util.Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("MXFP4 codes must be nibbles or int8, got '" + s + "'");
            }
        }
    }

    /**
     * The load-time layout of the fast path: each row's codes in groups of {@link Codes#groupBytes} bytes (a ragged last
     * group padded with zero codes), rows contiguous; the scales as in the checkpoint (row r's ng bytes at r·ng). Both
     * carry padding (16 and 8 bytes) so no vector load near the end needs a bounds special case.
     */
    public record Repacked(MemorySegment packed, MemorySegment scales, int rows, int in, Codes codes) {
        /** Byte offset of row r's codes. */
        long rowBase(int r) {
            return (long) r * groups(in) * codes.groupBytes;
        }
    }

    /** Bytes of a repacked matrix's codes. */
    public static long packedBytes(int rows, int in, Codes codes) {
        return (long) rows * groups(in) * codes.groupBytes + 16;
    }

    /** Bytes of a repacked matrix's scales. */
    public static long scaleBytes(int rows, int in) {
        return (long) rows * groups(in) + 8;
    }

    /** Repacks canonical bytes (checkpoint layout) for {@link #matmul}, nibble codes, onto the heap. */
    public static Repacked repack(MemorySegment packed, MemorySegment scales, int rows, int in) {
        return repack(packed, scales, rows, in, Codes.NIBBLES);
    }

    /** Repacks canonical bytes for {@link #matmul} in the given code form, onto the heap. */
    public static Repacked repack(MemorySegment packed, MemorySegment scales, int rows, int in, Codes codes) {
        MemorySegment dp = MemorySegment.ofArray(new byte[Math.toIntExact(packedBytes(rows, in, codes))]);
        MemorySegment ds = MemorySegment.ofArray(new byte[Math.toIntExact(scaleBytes(rows, in))]);
        return repackInto(packed, scales, rows, in, codes, dp, ds);
    }

    /**
     * Repacks canonical bytes into {@code dstPacked} ({@link #packedBytes} long) and {@code dstScales}
     * ({@link #scaleBytes} long), which may be off-heap (an expert cache slot). Every destination byte is written.
     */
    public static Repacked repackInto(MemorySegment packed, MemorySegment scales, int rows, int in, Codes codes,
                                      MemorySegment dstPacked, MemorySegment dstScales) {
        checkGeometry(packed.byteSize(), scales.byteSize(), rows, in);
        if (dstPacked.byteSize() != packedBytes(rows, in, codes) || dstScales.byteSize() != scaleBytes(rows, in)) {
            throw new IllegalArgumentException("repack destination of " + dstPacked.byteSize() + " + " + dstScales.byteSize()
                    + " bytes, [" + rows + ", " + in + "] " + codes + " needs " + packedBytes(rows, in, codes) + " + " + scaleBytes(rows, in));
        }
        int ng = groups(in), rb = in / 2, gb = codes.groupBytes;
        if (codes == Codes.NIBBLES) {
            // nibble codes keep the checkpoint's bytes (dst[p] = src[p]), a ragged last group padded with zero codes:
            // row copies, not a loop over 1.6 GB of bytes one at a time (the expert loads of a 48-token prefill)
            long row = (long) ng * gb;
            if (row == rb) MemorySegment.copy(packed, 0, dstPacked, 0, (long) rows * rb);
            else {
                for (int r = 0; r < rows; r++) {
                    MemorySegment.copy(packed, (long) r * rb, dstPacked, r * row, rb);
                    dstPacked.asSlice(r * row + rb, row - rb).fill((byte) 0);
                }
            }
            MemorySegment.copy(scales, 0, dstScales, 0, (long) rows * ng);
            dstPacked.asSlice((long) rows * ng * gb).fill((byte) 0);
            dstScales.asSlice((long) rows * ng).fill((byte) 255);
            return new Repacked(dstPacked, dstScales, rows, in, codes);
        }
        byte[] src = new byte[rb], dst = new byte[ng * gb];
        for (int r = 0; r < rows; r++) {
            MemorySegment.copy(packed, ValueLayout.JAVA_BYTE, (long) r * rb, src, 0, rb);
            java.util.Arrays.fill(dst, (byte) 0);
            for (int p = 0; p < rb; p++) {   // int8: per block of 16 the even elements' codes, then the odd ones'
                int b = src[p] & 0xFF, k = 2 * p, g = k / GROUP, e = k % GROUP, at = g * gb + (e / 16) * 16 + (e % 16) / 2;
                dst[at] = (byte) (b & 15);
                dst[at + 8] = (byte) (b >>> 4);
            }
            MemorySegment.copy(dst, 0, dstPacked, ValueLayout.JAVA_BYTE, (long) r * ng * gb, dst.length);
        }
        MemorySegment.copy(scales, 0, dstScales, 0, (long) rows * ng);
        dstPacked.asSlice((long) rows * ng * gb).fill((byte) 0);
        dstScales.asSlice((long) rows * ng).fill((byte) 255);
        return new Repacked(dstPacked, dstScales, rows, in, codes);
    }

    /** E8M0 byte → 2^(b − 127) as float (b = 255 is never looked up: its group is skipped). */
    static final float[] SCALE = new float[256];

    static {
        for (int b = 0; b < 255; b++) SCALE[b] = scale(b);
    }

    static final VectorSpecies<Byte> B64 = ByteVector.SPECIES_64;
    static final VectorSpecies<Float> F = FloatVector.SPECIES_256;
    static final VectorSpecies<Integer> I = IntVector.SPECIES_256;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    static final int SIGN = 0x80000000;

    /** Fast: y[tokens][rows] = W x[tokens][in] from the repacked layout, bit-identical to {@link #reference}. */
    public static void matmul(Workers workers, float[] y, float[] x, int tokens, Repacked w) {
        int in = w.in(), rows = w.rows();
        if (x.length < (long) tokens * in || y.length < (long) tokens * rows) {
            throw new IllegalArgumentException("MXFP4 matmul: x " + x.length + " / y " + y.length + " floats too short for " + tokens + " tokens of [" + rows + ", " + in + "]");
        }
        if (!KernelPath.vector((long) tokens * rows * in)) {
            scalarRows(y, x, tokens, w, 0, rows);
            return;
        }
        matmulVector(workers, y, x, tokens, w, KernelPath.wide());
    }

    /** The Vector API path, on the 512-bit kernels when {@code wide} (tests run both widths). */
    static void matmulVector(Workers workers, float[] y, float[] x, int tokens, Repacked w, boolean wide) {
        int rows = w.rows();
        if (wide && tokens == 1) {
            float[] xs = w.codes() == Codes.INT8 ? MatVec.laneOrder(x, 1, w.in()) : x;
            workers.split(rows, 4, (from, to) -> rowsOneToken512(y, x, xs, w, from, to));
            return;
        }
        float[] xp = MatVec.laneOrder(x, tokens, w.in());
        if (tokens > 1 && wide) workers.split(rows, 4, (from, to) -> rowsTiled(y, x, xp, tokens, w, from, to));
        else if (tokens > 1) workers.split(rows, 1, (from, to) -> rowsStaged(y, x, xp, tokens, w, from, to));
        else workers.split(rows, 1, (from, to) -> rowsOneToken(y, x, xp, w, from, to));
    }

    private static void rowsOneToken(float[] y, float[] x, float[] xp, Repacked w, int from, int to) {
        int ng = groups(w.in());
        final float[] t = new float[16];
        final byte[] sc = new byte[ng];
        final boolean int8 = w.codes() == Codes.INT8;
        for (int r = from; r < to; r++) {
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) r * ng, sc, 0, ng);
            oneRow(w.packed(), w.rowBase(r), sc, int8, xp, w.in(), t);
            y[r] = tail(MatVec.treeLaneOrder(t), w, r, sc, x, 0);
        }
    }

    /**
     * One row's full blocks of 16 for one token into t (lane order: even elements' accumulators, then odd ones'). Per
     * group the eight magnitudes E2M1[0..7] · scale (exact) are one vector; a block's 8 code bytes widened to 8 int
     * lanes index it by lane permutation (vpermps), low nibbles giving the even elements and high nibbles the odd
     * ones, and code bit 3 is OR-ed in as the sign: exactly T_g[code], −0 included.
     */
    private static void oneRow(MemorySegment pk, long base, byte[] sc, boolean int8, float[] xp, int in, float[] t) {
        FloatVector e = FloatVector.zero(F), o = e;
        final int full = in & ~15, gb = int8 ? 32 : 16, step = int8 ? 16 : 8;
        for (int i = 0, g = 0; i < full; i += GROUP, g++) {
            int sb = sc[g] & 0xFF;
            if (sb == 255) continue;
            IntVector tab = FloatVector.fromArray(F, E2M1, 0).mul(SCALE[sb]).reinterpretAsInts();
            long at = base + (long) g * gb;
            for (int h = 0; h < 2 && i + 16 * h < full; h++, at += step) {
                IntVector ce, co;
                if (int8) {
                    ce = (IntVector) ByteVector.fromMemorySegment(B64, pk, at, LE).convertShape(VectorOperators.B2I, I, 0);
                    co = (IntVector) ByteVector.fromMemorySegment(B64, pk, at + 8, LE).convertShape(VectorOperators.B2I, I, 0);
                } else {
                    ce = (IntVector) ByteVector.fromMemorySegment(B64, pk, at, LE).convertShape(VectorOperators.B2I, I, 0);
                    co = ce.lanewise(VectorOperators.ASHR, 4);
                }
                FloatVector we = ce.and(7).selectFrom(tab).or(ce.lanewise(VectorOperators.LSHL, 28).and(SIGN)).reinterpretAsFloats();
                FloatVector wo = co.and(7).selectFrom(tab).or(co.lanewise(VectorOperators.LSHL, 28).and(SIGN)).reinterpretAsFloats();
                e = we.fma(FloatVector.fromArray(F, xp, i + 16 * h), e);
                o = wo.fma(FloatVector.fromArray(F, xp, i + 16 * h + 8), o);
            }
        }
        e.intoArray(t, 0);
        o.intoArray(t, 8);
    }

    static final VectorSpecies<Byte> B128 = ByteVector.SPECIES_128;
    static final VectorSpecies<Float> F16 = FloatVector.SPECIES_512;
    static final VectorSpecies<Integer> I16 = IntVector.SPECIES_512;

    /**
     * Two-source lane indices (0..15 the low-nibble codes, 16..31 the high ones, lane j of each from byte j of a group)
     * that put a group's first block of 16 (A) and second (B) in natural element order: element 2j is byte j's low
     * nibble, element 2j+1 its high one.
     */
    static final int[] PAIR_A = new int[16], PAIR_B = new int[16];

    static {
        for (int l = 0; l < 16; l++) {
            PAIR_A[l] = l / 2 + 16 * (l & 1);
            PAIR_B[l] = 8 + l / 2 + 16 * (l & 1);
        }
    }

    /**
     * One token, 512-bit vectors, four rows in flight (four FMA chains, four code streams). The sixteen accumulators
     * are one FloatVector; the group's table T_g (16 entries, sign included) is one vector looked up by lane permutation.
     * Nibble codes: lanes in natural order against x; int8 codes: the block's stored order (evens, odds) against x in
     * lane order (xs). Same weights, accumulators and order as the contract: same bits.
     */
    private static void rowsOneToken512(float[] y, float[] x, float[] xs, Repacked w, int from, int to) {
        int in = w.in(), ng = groups(in);
        final float[] t = new float[64];
        final byte[] sc = new byte[4 * ng];
        final boolean int8 = w.codes() == Codes.INT8;
        final long rowBytes = (long) ng * w.codes().groupBytes;
        for (int r = from; r < to; ) {
            int n = Math.min(4, to - r);
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) r * ng, sc, 0, n * ng);
            if (n == 4 && !int8) quadNibbles512(w.packed(), w.rowBase(r), rowBytes, sc, ng, x, in, t);
            else if (n == 4) quadInt8512(w.packed(), w.rowBase(r), rowBytes, sc, ng, xs, in, t);
            else for (int k = 0; k < n; k++) row512(w.packed(), w.rowBase(r + k), sc, k * ng, int8, int8 ? xs : x, in, t, 16 * k);
            for (int k = 0; k < n; k++) {
                System.arraycopy(t, 16 * k, t, 0, k == 0 ? 0 : 16);
                float acc = int8 ? MatVec.treeLaneOrder(t) : MatVec.tree(t);
                int in16 = in & ~15;
                for (int i = in16; i < in; i++) {
                    int sb = sc[k * ng + i / GROUP] & 0xFF;
                    if (sb != 255) acc = Math.fma(E2M1[code(w.packed(), w.codes(), w.rowBase(r + k), i)] * SCALE[sb], x[i], acc);
                }
                y[r + k] = acc;
            }
            r += n;
        }
    }

    /**
     * Four nibble-coded rows (row k's codes at base + k·rowBytes, its scales at sc[k·ng]) into t[16k .. 16k+16), natural
     * lane order. The codes are not masked to their nibble: the table lookup (selectFrom) wraps its index modulo 16
     * (the low four bits, which vpermd reads alone), so a byte's widened value indexes by its low nibble, and that
     * value shifted right by four by its high one.
     */
    private static void quadNibbles512(MemorySegment pk, long base, long rowBytes, byte[] sc, int ng, float[] x, int in, float[] t) {
        FloatVector a0 = FloatVector.zero(F16), a1 = a0, a2 = a0, a3 = a0;
        final FloatVector e2m1 = FloatVector.fromArray(F16, E2M1, 0);
        final IntVector pa = IntVector.fromArray(I16, PAIR_A, 0), pb = IntVector.fromArray(I16, PAIR_B, 0);
        final int full = in & ~15, pairs = full / GROUP;
        // the groups whose two blocks are full, then (in mod 32 >= 16) the last group's first block alone
        for (int g = 0; g <= pairs && g < ng; g++) {
            int i = g * GROUP;
            if (i >= full) break;
            boolean two = g < pairs;
            FloatVector xa = FloatVector.fromArray(F16, x, i);
            FloatVector xb = FloatVector.fromArray(F16, x, two ? i + 16 : i);
            long at = base + 16L * g;
            int s0 = sc[g] & 0xFF, s1 = sc[ng + g] & 0xFF, s2 = sc[2 * ng + g] & 0xFF, s3 = sc[3 * ng + g] & 0xFF;
            // a byte-255 group is skipped: its table is all zero and its products are not added (x · 0 + a != a for −0, Inf, NaN)
            if (s0 != 255) {
                IntVector tab = e2m1.mul(SCALE[s0]).reinterpretAsInts();
                IntVector c = (IntVector) ByteVector.fromMemorySegment(B128, pk, at, LE).convertShape(VectorOperators.B2I, I16, 0);
                IntVector lo = c, hi = c.lanewise(VectorOperators.LSHR, 4);
                a0 = pa.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xa, a0);
                if (two) a0 = pb.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xb, a0);
            }
            if (s1 != 255) {
                IntVector tab = e2m1.mul(SCALE[s1]).reinterpretAsInts();
                IntVector c = (IntVector) ByteVector.fromMemorySegment(B128, pk, at + rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0);
                IntVector lo = c, hi = c.lanewise(VectorOperators.LSHR, 4);
                a1 = pa.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xa, a1);
                if (two) a1 = pb.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xb, a1);
            }
            if (s2 != 255) {
                IntVector tab = e2m1.mul(SCALE[s2]).reinterpretAsInts();
                IntVector c = (IntVector) ByteVector.fromMemorySegment(B128, pk, at + 2 * rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0);
                IntVector lo = c, hi = c.lanewise(VectorOperators.LSHR, 4);
                a2 = pa.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xa, a2);
                if (two) a2 = pb.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xb, a2);
            }
            if (s3 != 255) {
                IntVector tab = e2m1.mul(SCALE[s3]).reinterpretAsInts();
                IntVector c = (IntVector) ByteVector.fromMemorySegment(B128, pk, at + 3 * rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0);
                IntVector lo = c, hi = c.lanewise(VectorOperators.LSHR, 4);
                a3 = pa.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xa, a3);
                if (two) a3 = pb.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(xb, a3);
            }
        }
        a0.intoArray(t, 0);
        a1.intoArray(t, 16);
        a2.intoArray(t, 32);
        a3.intoArray(t, 48);
    }

    /** Four int8-coded rows into t[16k .. 16k+16), each block's lanes in stored order (evens, odds) against x in lane order. */
    private static void quadInt8512(MemorySegment pk, long base, long rowBytes, byte[] sc, int ng, float[] xs, int in, float[] t) {
        FloatVector a0 = FloatVector.zero(F16), a1 = a0, a2 = a0, a3 = a0;
        final FloatVector e2m1 = FloatVector.fromArray(F16, E2M1, 0);
        final int full = in & ~15;
        for (int i = 0, g = 0; i < full; i += 16, g = i / GROUP) {
            FloatVector xv = FloatVector.fromArray(F16, xs, i);
            long at = base + 32L * g + (i % GROUP);
            int s0 = sc[g] & 0xFF, s1 = sc[ng + g] & 0xFF, s2 = sc[2 * ng + g] & 0xFF, s3 = sc[3 * ng + g] & 0xFF;
            if (s0 != 255) a0 = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at, LE).convertShape(VectorOperators.B2I, I16, 0))
                    .selectFrom(e2m1.mul(SCALE[s0]).reinterpretAsInts()).reinterpretAsFloats().fma(xv, a0);
            if (s1 != 255) a1 = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at + rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0))
                    .selectFrom(e2m1.mul(SCALE[s1]).reinterpretAsInts()).reinterpretAsFloats().fma(xv, a1);
            if (s2 != 255) a2 = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at + 2 * rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0))
                    .selectFrom(e2m1.mul(SCALE[s2]).reinterpretAsInts()).reinterpretAsFloats().fma(xv, a2);
            if (s3 != 255) a3 = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at + 3 * rowBytes, LE).convertShape(VectorOperators.B2I, I16, 0))
                    .selectFrom(e2m1.mul(SCALE[s3]).reinterpretAsInts()).reinterpretAsFloats().fma(xv, a3);
        }
        a0.intoArray(t, 0);
        a1.intoArray(t, 16);
        a2.intoArray(t, 32);
        a3.intoArray(t, 48);
    }

    /** One row (codes at base, scales at sc[so]) into t[to .. to+16), as the quad kernels do for each of theirs. */
    private static void row512(MemorySegment pk, long base, byte[] sc, int so, boolean int8, float[] xs, int in, float[] t, int to) {
        FloatVector a = FloatVector.zero(F16);
        final FloatVector e2m1 = FloatVector.fromArray(F16, E2M1, 0);
        final IntVector pa = IntVector.fromArray(I16, PAIR_A, 0), pb = IntVector.fromArray(I16, PAIR_B, 0);
        final int full = in & ~15;
        for (int i = 0, g = 0; i < full; i += GROUP, g++) {
            int sb = sc[so + g] & 0xFF;
            if (sb == 255) continue;
            boolean two = i + GROUP <= full;
            IntVector tab = e2m1.mul(SCALE[sb]).reinterpretAsInts();
            if (int8) {
                long at = base + 32L * g;
                a = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at, LE).convertShape(VectorOperators.B2I, I16, 0))
                        .selectFrom(tab).reinterpretAsFloats().fma(FloatVector.fromArray(F16, xs, i), a);
                if (two) a = ((IntVector) ByteVector.fromMemorySegment(B128, pk, at + 16, LE).convertShape(VectorOperators.B2I, I16, 0))
                        .selectFrom(tab).reinterpretAsFloats().fma(FloatVector.fromArray(F16, xs, i + 16), a);
            } else {
                IntVector c = (IntVector) ByteVector.fromMemorySegment(B128, pk, base + 16L * g, LE).convertShape(VectorOperators.B2I, I16, 0);
                IntVector lo = c, hi = c.lanewise(VectorOperators.LSHR, 4);
                a = pa.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(FloatVector.fromArray(F16, xs, i), a);
                if (two) a = pb.selectFrom(lo, hi).selectFrom(tab).reinterpretAsFloats().fma(FloatVector.fromArray(F16, xs, i + 16), a);
            }
        }
        a.intoArray(t, to);
    }

    /** The in mod 16 tail of row r for the token whose x starts at xo, continuing acc by FMA (byte-255 groups skipped). */
    private static float tail(float acc, Repacked w, int r, byte[] sc, float[] x, int xo) {
        int in = w.in();
        for (int i = in & ~15; i < in; i++) {
            int sb = sc[i / GROUP] & 0xFF;
            if (sb != 255) acc = Math.fma(E2M1[code(w.packed(), w.codes(), w.rowBase(r), i)] * SCALE[sb], x[xo + i], acc);
        }
        return acc;
    }

    /**
     * Several tokens: each row's full blocks are decoded once into {@code staged} (the weights T_g[code], in the fast
     * path's lane order) and every token's accumulators read from it: same values, lanes, accumulators and order as
     * one token, so the same bits.
     */
    private static void rowsStaged(float[] y, float[] x, float[] xp, int tokens, Repacked w, int from, int to) {
        final float[] t = new float[16], staged = new float[(w.in() & ~15) + 16];
        final byte[] sc = new byte[groups(w.in())];
        for (int r = from; r < to; r++) rowStaged(y, x, xp, tokens, w, r, sc, staged, t);
    }

    /** Row r for every token through one staged row (sc, staged and t are scratch). */
    private static void rowStaged(float[] y, float[] x, float[] xp, int tokens, Repacked w, int r, byte[] sc, float[] staged, float[] t) {
        int in = w.in(), ng = groups(in);
        MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) r * ng, sc, 0, ng);
        stageRow(w.packed(), w.rowBase(r), sc, w.codes() == Codes.INT8, in, staged, 0);
        for (int tk = 0; tk < tokens; tk++) {
            stagedRow(staged, sc, xp, tk * in, in, t);
            y[tk * w.rows() + r] = tail(MatVec.treeLaneOrder(t), w, r, sc, x, tk * in);
        }
    }

    /**
     * Several tokens on 512-bit tiles ({@link Tiles#staged4}): four rows are decoded into {@code staged} (lane order,
     * as {@link #rowsStaged} does) and every token's accumulators (one FloatVector512 in the lane order of x) read
     * them in register tiles of four rows x six tokens; same values, accumulators and order, so the same bits. Four
     * rows with any byte-255 group (corrupt data only) go row by row, where those groups are skipped.
     */
    private static void rowsTiled(float[] y, float[] x, float[] xp, int tokens, Repacked w, int from, int to) {
        int in = w.in(), ng = groups(in), rows = w.rows(), full = in & ~15;
        final float[] t = new float[16], staged = new float[4 * full + 16], acc = new float[4 * 16 * tokens];
        final byte[][] sc = new byte[4][ng];
        final boolean int8 = w.codes() == Codes.INT8;
        int r = from;
        for (; r + 4 <= to; r += 4) {
            boolean zeroed = false;
            for (int j = 0; j < 4; j++) {
                MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) (r + j) * ng, sc[j], 0, ng);
                for (int g = 0; g < ng; g++) zeroed |= sc[j][g] == (byte) 255;
            }
            if (zeroed) {
                for (int j = 0; j < 4; j++) rowStaged(y, x, xp, tokens, w, r + j, sc[0], staged, t);
                continue;
            }
            for (int j = 0; j < 4; j++) stageRow(w.packed(), w.rowBase(r + j), sc[j], int8, in, staged, j * full);
            java.util.Arrays.fill(acc, 0.0f);
            Tiles.staged4(staged, 0, full, xp, tokens, in, acc);
            for (int j = 0; j < 4; j++) {
                for (int tk = 0; tk < tokens; tk++) {
                    System.arraycopy(acc, j * 16 * tokens + 16 * tk, t, 0, 16);
                    y[tk * rows + r + j] = tail(MatVec.treeLaneOrder(t), w, r + j, sc[j], x, tk * in);
                }
            }
        }
        for (; r < to; r++) rowStaged(y, x, xp, tokens, w, r, sc[0], staged, t);
    }

    /** Decodes one row's full blocks of 16 into staged from so (lane order), as {@link #oneRow} does; byte-255 groups are left unread. */
    private static void stageRow(MemorySegment pk, long base, byte[] sc, boolean int8, int in, float[] staged, int so) {
        final int full = in & ~15, gb = int8 ? 32 : 16, step = int8 ? 16 : 8;
        for (int i = 0, g = 0; i < full; i += GROUP, g++) {
            int sb = sc[g] & 0xFF;
            if (sb == 255) continue;
            IntVector tab = FloatVector.fromArray(F, E2M1, 0).mul(SCALE[sb]).reinterpretAsInts();
            long at = base + (long) g * gb;
            for (int h = 0; h < 2 && i + 16 * h < full; h++, at += step) {
                IntVector ce, co;
                if (int8) {
                    ce = (IntVector) ByteVector.fromMemorySegment(B64, pk, at, LE).convertShape(VectorOperators.B2I, I, 0);
                    co = (IntVector) ByteVector.fromMemorySegment(B64, pk, at + 8, LE).convertShape(VectorOperators.B2I, I, 0);
                } else {
                    ce = (IntVector) ByteVector.fromMemorySegment(B64, pk, at, LE).convertShape(VectorOperators.B2I, I, 0);
                    co = ce.lanewise(VectorOperators.ASHR, 4);
                }
                ce.and(7).selectFrom(tab).or(ce.lanewise(VectorOperators.LSHL, 28).and(SIGN)).reinterpretAsFloats().intoArray(staged, so + i + 16 * h);
                co.and(7).selectFrom(tab).or(co.lanewise(VectorOperators.LSHL, 28).and(SIGN)).reinterpretAsFloats().intoArray(staged, so + i + 16 * h + 8);
            }
        }
    }

    /** One token (x in lane order from xa) against a staged row: the full blocks' accumulators into t. */
    private static void stagedRow(float[] staged, byte[] sc, float[] xp, int xa, int in, float[] t) {
        FloatVector e = FloatVector.zero(F), o = e;
        final int full = in & ~15;
        for (int i = 0; i < full; i += 16) {
            if ((sc[i / GROUP] & 0xFF) == 255) continue;
            e = FloatVector.fromArray(F, staged, i).fma(FloatVector.fromArray(F, xp, xa + i), e);
            o = FloatVector.fromArray(F, staged, i + 8).fma(FloatVector.fromArray(F, xp, xa + i + 8), o);
        }
        e.intoArray(t, 0);
        o.intoArray(t, 8);
    }

    /**
     * The scalar contract over the repacked layout (small matrices; no Vector API warm-up): each row's codes are
     * copied to the heap and dequantised once, then summed by {@link MatVec#row(float[], int, float[], int, int, byte[])} for every token.
     */
    private static void scalarRows(float[] y, float[] x, int tokens, Repacked w, int from, int to) {
        int in = w.in(), rows = w.rows(), ng = groups(in), gb = w.codes().groupBytes;
        boolean int8 = w.codes() == Codes.INT8;
        float[] wr = new float[in];
        byte[] sc = new byte[ng], pk = new byte[ng * gb];
        for (int r = from; r < to; r++) {
            // bulk copies, then array reads: an access per element is a deep call chain under C1 (oracle-sized runs)
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) r * ng, sc, 0, ng);
            MemorySegment.copy(w.packed(), ValueLayout.JAVA_BYTE, w.rowBase(r), pk, 0, pk.length);
            decodeRow(pk, sc, int8, in, wr);
            for (int tk = 0; tk < tokens; tk++) y[tk * rows + r] = MatVec.row(wr, 0, x, tk * in, in, sc);
        }
    }

    /** One repacked row's weights T_g[code] into wr[0 .. in) (a byte-255 group as zeros, which the row's sum skips). */
    private static void decodeRow(byte[] pk, byte[] sc, boolean int8, int in, float[] wr) {
        for (int k = 0; k < in; k++) {
            int g = k >> 5, e = k & 31, sb = sc[g] & 0xFF;
            int c = int8 ? pk[g * 32 + (e & 16) + (e & 1) * 8 + ((e & 15) >> 1)] : (pk[g * 16 + (e >> 1)] >> ((k & 1) * 4)) & 15;
            wr[k] = sb == 255 ? 0.0f : E2M1[c] * SCALE[sb];
        }
    }

    /** The E2M1 code of element k of a repacked row whose codes start at byte base. */
    static int code(MemorySegment pk, Codes codes, long base, int k) {
        int g = k / GROUP, e = k % GROUP;
        if (codes == Codes.INT8) return pk.get(ValueLayout.JAVA_BYTE, base + (long) g * 32 + (e / 16) * 16 + (e % 2) * 8 + (e % 16) / 2);
        int b = pk.get(ValueLayout.JAVA_BYTE, base + (long) g * 16 + e / 2) & 0xFF;
        return (k & 1) == 0 ? b & 15 : b >>> 4;
    }
}
