package k3j.kernels;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.DoubleVector;
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
 * <p>Matvec order per row: x widened to double once; for each group g in order, skipped if its scale byte
 * is 255: eight double accumulators s[k mod 8] over the group's full blocks of 8, reduced
 * ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then the group's leftover elements added in order; then
 * acc = acc + sub · scale. y = (float) acc.
 */
public final class Mxfp4 {
    private Mxfp4() {}

    public static final int GROUP = 32;

    /** E2M1 code → value (bit 3 is the sign; code 8 is −0). */
    static final float[] E2M1 = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

    /** 2 × E2M1 as int8: the fast path's pshufb table (−0 becomes 0, which never changes a sum: see contract). */
    static final byte[] E2M1_TWICE = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

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

    /**
     * Dequantises from the repacked layout (proves the repack loses nothing: must equal {@link #dequant}; in
     * {@link Codes#INT8} form code 8, −0, reads back as +0, which no sum can tell apart).
     */
    public static float[] dequant(Repacked w) {
        int in = w.in(), ng = groups(in), gb = w.codes().groupBytes;
        float[] out = new float[w.rows() * in];
        for (int r = 0; r < w.rows(); r++) {
            int bl = r / 4, j = r % 4;
            for (int k = 0; k < in; k++) {
                int g = k / GROUP;
                long base = ((long) bl * ng + g) * gb;
                out[r * in + k] = code(w.packed(), w.codes(), base, j, k % GROUP) * scale(w.scales().get(ValueLayout.JAVA_BYTE, ((long) bl * ng + g) * 4 + j));
            }
        }
        return out;
    }

    // ------------------------------------------------------------------ reference path

    /** Reference: y[tokens][rows] = W x[tokens][in] over the canonical (checkpoint) layout. */
    public static void reference(float[] y, float[] x, int tokens, MemorySegment packed, MemorySegment scales, int rows, int in) {
        checkGeometry(packed.byteSize(), scales.byteSize(), rows, in);
        int ng = groups(in);
        float[] wf = new float[GROUP];
        double[] s = new double[8];
        for (int t = 0; t < tokens; t++) {
            for (int r = 0; r < rows; r++) {
                double acc = 0.0;
                for (int g = 0; g < ng; g++) {
                    int sb = scales.get(ValueLayout.JAVA_BYTE, (long) r * ng + g) & 0xFF;
                    if (sb == 255) continue;
                    int i0 = g * GROUP, n = Math.min(GROUP, in - i0);
                    for (int k = 0; k < n; k++) {
                        int b = packed.get(ValueLayout.JAVA_BYTE, (long) r * (in / 2) + (i0 + k) / 2) & 0xFF;
                        wf[k] = E2M1[(k & 1) == 0 ? b & 15 : b >>> 4];
                    }
                    java.util.Arrays.fill(s, 0.0);
                    int k = 0;
                    for (; k + 8 <= n; k += 8) {
                        for (int l = 0; l < 8; l++) s[l] = s[l] + (double) wf[k + l] * (double) x[t * in + i0 + k + l];
                    }
                    double sub = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
                    for (; k < n; k++) sub = sub + (double) wf[k] * (double) x[t * in + i0 + k];
                    acc = acc + sub * (double) scale(sb);
                }
                y[t * rows + r] = (float) acc;
            }
        }
    }

    // ------------------------------------------------------------------ repacked layout + fast path

    /**
     * How a repacked matrix stores its codes. {@link #NIBBLES}: two E2M1 codes per byte, as in the checkpoint
     * (decoded by a table lookup in the kernel). {@link #INT8}: every code predecoded to 2·E2M1 as one signed byte
     * (twice the bytes, no lookup in the kernel). Both give the same bits (docs/fp-contract.md §2 "MXFP4").
     */
    public enum Codes {
        NIBBLES(64), INT8(128);

        /** Bytes per (block of 4 rows, group of 32). */
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
     * The load-time repack for the across-rows fast path: rows in blocks of 4 (the last block padded with
     * scale-255 rows); per (block, group), in {@link Codes#NIBBLES} form 64 bytes where byte p (0..15) of row j
     * sits at p·4 + j (a ragged last group is padded with zero codes), in {@link Codes#INT8} form 128 bytes where
     * element k (0..31) of row j sits at k·4 + j; and 4 scale bytes (row j at j). The codes carry 16 bytes of
     * padding (the fast path reads 16 bytes at every 4-byte position) and the scales 8 (an 8-byte load at the
     * last group stays in bounds).
     */
    public record Repacked(MemorySegment packed, MemorySegment scales, int rows, int in, Codes codes) {
        public int blocks() {
            return (rows + 3) / 4;
        }
    }

    /** Bytes of a repacked matrix's codes. */
    public static long packedBytes(int rows, int in, Codes codes) {
        return (long) ((rows + 3) / 4) * groups(in) * codes.groupBytes + 16;
    }

    /** Bytes of a repacked matrix's scales. */
    public static long scaleBytes(int rows, int in) {
        return (long) ((rows + 3) / 4) * groups(in) * 4 + 8;
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
        int ng = groups(in), blocks = (rows + 3) / 4, rb = in / 2, gb = codes.groupBytes;
        // one block at a time through heap buffers: 4 canonical rows in, one interleaved block out
        byte[] src = new byte[4 * rb], srcScales = new byte[4 * ng], dp = new byte[ng * gb], ds = new byte[ng * 4];
        for (int bl = 0; bl < blocks; bl++) {
            int have = Math.min(4, rows - 4 * bl);
            MemorySegment.copy(packed, ValueLayout.JAVA_BYTE, (long) 4 * bl * rb, src, 0, have * rb);
            MemorySegment.copy(scales, ValueLayout.JAVA_BYTE, (long) 4 * bl * ng, srcScales, 0, have * ng);
            java.util.Arrays.fill(dp, (byte) 0);
            java.util.Arrays.fill(ds, (byte) 255);
            for (int j = 0; j < have; j++) {
                int ro = j * rb;
                for (int g = 0; g < ng; g++) {
                    int base = g * gb + j, p0 = g * 16, n = Math.min(16, rb - p0);
                    if (codes == Codes.NIBBLES) {
                        for (int p = 0; p < n; p++) dp[base + p * 4] = src[ro + p0 + p];
                    } else {
                        for (int p = 0; p < n; p++) {
                            int b = src[ro + p0 + p] & 0xFF;
                            dp[base + p * 8] = E2M1_TWICE[b & 15];
                            dp[base + p * 8 + 4] = E2M1_TWICE[b >>> 4];
                        }
                    }
                    ds[g * 4 + j] = srcScales[j * ng + g];
                }
            }
            MemorySegment.copy(dp, 0, dstPacked, ValueLayout.JAVA_BYTE, (long) bl * ng * gb, dp.length);
            MemorySegment.copy(ds, 0, dstScales, ValueLayout.JAVA_BYTE, (long) bl * ng * 4, ds.length);
        }
        dstPacked.asSlice((long) blocks * ng * gb).fill((byte) 0);
        dstScales.asSlice((long) blocks * ng * 4).fill((byte) 255);
        return new Repacked(dstPacked, dstScales, rows, in, codes);
    }

    /** 2^(b − 128) for the fast path's 2·E2M1 codes (so the product is the reference's); 0 marks byte 255. */
    static final double[] E8M0_HALF = new double[256];

    static {
        for (int b = 0; b < 255; b++) E8M0_HALF[b] = Math.scalb(1.0, b - 128);
    }

    static final VectorSpecies<Byte> B128 = ByteVector.SPECIES_128;
    static final VectorSpecies<Byte> B64 = ByteVector.SPECIES_64;
    static final VectorSpecies<Double> D = DoubleVector.SPECIES_256;
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** Fast: y[tokens][rows] = W x[tokens][in] from the repacked layout, bit-identical to {@link #reference}. */
    public static void matmul(Workers workers, float[] y, float[] x, int tokens, Repacked w) {
        int in = w.in(), rows = w.rows();
        if (x.length < (long) tokens * in || y.length < (long) tokens * rows) {
            throw new IllegalArgumentException("MXFP4 matmul: x " + x.length + " / y " + y.length + " floats too short for " + tokens + " tokens of [" + rows + ", " + in + "]");
        }
        double[] xd = new double[tokens * in];
        for (int i = 0; i < xd.length; i++) xd[i] = x[i];
        if (!KernelPath.vector((long) tokens * rows * in)) {
            scalarRows(y, xd, tokens, w);
            return;
        }
        if (tokens > 1) workers.split(w.blocks(), 1, (from, to) -> blocksStaged(y, xd, tokens, w, from, to));
        else workers.split(w.blocks(), 1, (from, to) -> blocks(y, xd, tokens, w, from, to));
    }

    /**
     * Lanes are the 4 rows of a block, so each lane adds in exactly its row's scalar order. Byte position p
     * of a group holds element 2p (low nibble, accumulator s[2p mod 8]) and 2p+1 (high nibble) of the 4
     * rows in 4 consecutive bytes: a 16-byte load at 4p puts them in lanes 0..3, the pshufb LUT decodes all
     * 16 lanes and B2D part 0 (the only intrinsified expanding part) takes lanes 0..3. No spill buffer (an
     * earlier spill/reload version was 1.9x slower here). The LUT holds 2·E2M1 and the scale is
     * 2^(b − 128): every partial sum is exactly twice the scalar one and the product with the halved scale
     * is the same double.
     */
    private static void blocks(float[] y, double[] xd, int tokens, Repacked w, int from, int to) {
        final int ng = groups(w.in());
        final double[] lanes = new double[4], sv = new double[4];
        // one group of a block staged on the heap (one bulk copy; the vector loads from it need no segment checks)
        final byte[] gb = new byte[w.codes().groupBytes + 16];
        final byte[] sb4 = new byte[ng * 4 + 8];
        final boolean int8 = w.codes() == Codes.INT8;
        for (int bl = from; bl < to; bl++) {
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) bl * ng * 4, sb4, 0, ng * 4);
            for (int t = 0; t < tokens; t++) {
                if (int8) blockInt8(w, bl, sb4, gb, sv, xd, t * w.in(), lanes);
                else blockNibbles(w, bl, sb4, gb, sv, xd, t * w.in(), lanes);
                storeBlock(y, lanes, w, bl, t, xd);
            }
        }
    }

    /** The full groups of block bl for the token whose x starts at xo, nibble codes: the 4 rows' sums into lanes. */
    private static void blockNibbles(Repacked w, int bl, byte[] sb4, byte[] gb, double[] sv, double[] xd, int xo, double[] lanes) {
        final int ng = groups(w.in()), full = w.in() / GROUP;
        final ByteVector lut = ByteVector.fromArray(B128, E2M1_TWICE, 0);
        DoubleVector acc = DoubleVector.zero(D);
        for (int g = 0; g < full; g++) {
            MemorySegment.copy(w.packed(), ValueLayout.JAVA_BYTE, ((long) bl * ng + g) * 64, gb, 0, 64);
            DoubleVector s0 = DoubleVector.zero(D), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
            final int xg = xo + g * GROUP;
            for (int c = 0; c < 4; c++) {
                // byte positions 4c..4c+3 of the 4 rows; a 16-byte load at 4p whose lanes 0..3 are position p
                final int bp = 16 * c;
                final int xk = xg + 8 * c;
                ByteVector b0 = ByteVector.fromArray(B128, gb, bp);
                ByteVector b1 = ByteVector.fromArray(B128, gb, bp + 4);
                ByteVector b2 = ByteVector.fromArray(B128, gb, bp + 8);
                ByteVector b3 = ByteVector.fromArray(B128, gb, bp + 12);
                // products of a float and a small integer are exact in double: fma == mul then add
                s0 = ((DoubleVector) b0.and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk]), s0);
                s1 = ((DoubleVector) b0.reinterpretAsShorts().lanewise(VectorOperators.LSHR, 4).reinterpretAsBytes().and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 1]), s1);
                s2 = ((DoubleVector) b1.and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 2]), s2);
                s3 = ((DoubleVector) b1.reinterpretAsShorts().lanewise(VectorOperators.LSHR, 4).reinterpretAsBytes().and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 3]), s3);
                s4 = ((DoubleVector) b2.and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 4]), s4);
                s5 = ((DoubleVector) b2.reinterpretAsShorts().lanewise(VectorOperators.LSHR, 4).reinterpretAsBytes().and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 5]), s5);
                s6 = ((DoubleVector) b3.and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 6]), s6);
                s7 = ((DoubleVector) b3.reinterpretAsShorts().lanewise(VectorOperators.LSHR, 4).reinterpretAsBytes().and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 7]), s7);
            }
            DoubleVector sub = s0.add(s4).add(s1.add(s5)).add(s2.add(s6).add(s3.add(s7)));
            for (int j = 0; j < 4; j++) sv[j] = E8M0_HALF[sb4[g * 4 + j] & 0xFF];
            DoubleVector half = DoubleVector.fromArray(D, sv, 0);
            // a 255 byte has half == 0: its group must contribute nothing even if sub is Inf/NaN
            acc = acc.blend(acc.add(sub.mul(half)), half.compare(VectorOperators.NE, 0.0));
        }
        acc.intoArray(lanes, 0);
    }

    /**
     * {@link #blockNibbles} over {@link Codes#INT8} codes: element k of the 4 rows sits in 4 consecutive bytes, so a
     * 16-byte load at 4k and B2D part 0 give the 4 lanes directly, with no lookup or shift. Same lane order, same
     * accumulators, same bits.
     */
    private static void blockInt8(Repacked w, int bl, byte[] sb4, byte[] gb, double[] sv, double[] xd, int xo, double[] lanes) {
        final int ng = groups(w.in()), full = w.in() / GROUP;
        DoubleVector acc = DoubleVector.zero(D);
        for (int g = 0; g < full; g++) {
            MemorySegment.copy(w.packed(), ValueLayout.JAVA_BYTE, ((long) bl * ng + g) * 128, gb, 0, 128);
            DoubleVector s0 = DoubleVector.zero(D), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
            final int xg = xo + g * GROUP;
            for (int c = 0; c < 4; c++) {
                final int bp = 32 * c;
                final int xk = xg + 8 * c;
                s0 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk]), s0);
                s1 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 4).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 1]), s1);
                s2 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 8).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 2]), s2);
                s3 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 12).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 3]), s3);
                s4 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 16).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 4]), s4);
                s5 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 20).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 5]), s5);
                s6 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 24).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 6]), s6);
                s7 = ((DoubleVector) ByteVector.fromArray(B128, gb, bp + 28).convertShape(VectorOperators.B2D, D, 0)).fma(DoubleVector.broadcast(D, xd[xk + 7]), s7);
            }
            DoubleVector sub = s0.add(s4).add(s1.add(s5)).add(s2.add(s6).add(s3.add(s7)));
            for (int j = 0; j < 4; j++) sv[j] = E8M0_HALF[sb4[g * 4 + j] & 0xFF];
            DoubleVector half = DoubleVector.fromArray(D, sv, 0);
            acc = acc.blend(acc.add(sub.mul(half)), half.compare(VectorOperators.NE, 0.0));
        }
        acc.intoArray(lanes, 0);
    }

    /**
     * {@link #blocks} for several tokens (both code forms): each group of a block is decoded ONCE into {@code staged}
     * (element e of the group's 4 rows at staged[4e .. 4e+4), the values the one-token kernels form in registers)
     * and then used by every token, each token keeping its own block accumulator. The decode is most of the
     * one-token work (an earlier spill version was slower for ONE token, where nothing is shared). Same
     * accumulators, same order, same bits as {@link #blocks} token by token.
     */
    private static void blocksStaged(float[] y, double[] xd, int tokens, Repacked w, int from, int to) {
        final int in = w.in(), ng = groups(in), full = in / GROUP, groupBytes = w.codes().groupBytes;
        final boolean int8 = w.codes() == Codes.INT8;
        final double[] lanes = new double[4], sv = new double[4], staged = new double[GROUP * 4];
        final double[] accs = new double[tokens * 4];
        final byte[] gb = new byte[128 + 16];
        final byte[] sb4 = new byte[ng * 4 + 8];
        for (int bl = from; bl < to; bl++) {
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) bl * ng * 4, sb4, 0, ng * 4);
            java.util.Arrays.fill(accs, 0.0);
            for (int g = 0; g < full; g++) {
                MemorySegment.copy(w.packed(), ValueLayout.JAVA_BYTE, ((long) bl * ng + g) * groupBytes, gb, 0, groupBytes);
                if (int8) stageInt8(gb, staged);
                else stageNibbles(gb, staged);
                for (int j = 0; j < 4; j++) sv[j] = E8M0_HALF[sb4[g * 4 + j] & 0xFF];
                for (int t = 0; t < tokens; t++) stagedGroup(staged, sv, xd, t * in + g * GROUP, accs, 4 * t);
            }
            for (int t = 0; t < tokens; t++) {
                System.arraycopy(accs, 4 * t, lanes, 0, 4);
                storeBlock(y, lanes, w, bl, t, xd);
            }
        }
    }

    /** One group of int8 codes (gb) widened to staged[4e .. 4e+4) for element e of the 4 rows. */
    private static void stageInt8(byte[] gb, double[] staged) {
        for (int e = 0; e < GROUP; e++) ((DoubleVector) ByteVector.fromArray(B128, gb, 4 * e).convertShape(VectorOperators.B2D, D, 0)).intoArray(staged, 4 * e);
    }

    /** One group of nibble codes (gb) decoded to 2·E2M1 and widened to staged[4e .. 4e+4) for element e of the 4 rows. */
    private static void stageNibbles(byte[] gb, double[] staged) {
        final ByteVector lut = ByteVector.fromArray(B128, E2M1_TWICE, 0);
        for (int p = 0; p < GROUP / 2; p++) {
            ByteVector b = ByteVector.fromArray(B128, gb, 4 * p);
            ((DoubleVector) b.and((byte) 0x0F).selectFrom(lut).convertShape(VectorOperators.B2D, D, 0)).intoArray(staged, 8 * p);
            ((DoubleVector) b.reinterpretAsShorts().lanewise(VectorOperators.LSHR, 4).reinterpretAsBytes().and((byte) 0x0F).selectFrom(lut)
                    .convertShape(VectorOperators.B2D, D, 0)).intoArray(staged, 8 * p + 4);
        }
    }

    /** One staged group times one token's x (from xg), added to that token's block accumulator accs[ao .. ao+4) unless its scale is 255. */
    private static void stagedGroup(double[] staged, double[] sv, double[] xd, int xg, double[] accs, int ao) {
        DoubleVector s0 = DoubleVector.zero(D), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        for (int c = 0; c < 4; c++) {
            final int e = 8 * c, xk = xg + e;
            s0 = DoubleVector.fromArray(D, staged, 4 * e).fma(DoubleVector.broadcast(D, xd[xk]), s0);
            s1 = DoubleVector.fromArray(D, staged, 4 * e + 4).fma(DoubleVector.broadcast(D, xd[xk + 1]), s1);
            s2 = DoubleVector.fromArray(D, staged, 4 * e + 8).fma(DoubleVector.broadcast(D, xd[xk + 2]), s2);
            s3 = DoubleVector.fromArray(D, staged, 4 * e + 12).fma(DoubleVector.broadcast(D, xd[xk + 3]), s3);
            s4 = DoubleVector.fromArray(D, staged, 4 * e + 16).fma(DoubleVector.broadcast(D, xd[xk + 4]), s4);
            s5 = DoubleVector.fromArray(D, staged, 4 * e + 20).fma(DoubleVector.broadcast(D, xd[xk + 5]), s5);
            s6 = DoubleVector.fromArray(D, staged, 4 * e + 24).fma(DoubleVector.broadcast(D, xd[xk + 6]), s6);
            s7 = DoubleVector.fromArray(D, staged, 4 * e + 28).fma(DoubleVector.broadcast(D, xd[xk + 7]), s7);
        }
        DoubleVector sub = s0.add(s4).add(s1.add(s5)).add(s2.add(s6).add(s3.add(s7)));
        DoubleVector half = DoubleVector.fromArray(D, sv, 0);
        DoubleVector acc = DoubleVector.fromArray(D, accs, ao);
        acc.blend(acc.add(sub.mul(half)), half.compare(VectorOperators.NE, 0.0)).intoArray(accs, ao);
    }

    /**
     * The scalar contract over the repacked layout (small matrices; no Vector API warm-up). Each block's bytes
     * are copied to the heap once, so the loops read plain arrays.
     */
    private static void scalarRows(float[] y, double[] xd, int tokens, Repacked w) {
        int in = w.in(), rows = w.rows(), ng = groups(in), gb = w.codes().groupBytes;
        boolean int8 = w.codes() == Codes.INT8;
        byte[] pk = new byte[ng * gb], sc = new byte[ng * 4];
        for (int bl = 0; bl < w.blocks(); bl++) {
            MemorySegment.copy(w.packed(), ValueLayout.JAVA_BYTE, (long) bl * ng * gb, pk, 0, pk.length);
            MemorySegment.copy(w.scales(), ValueLayout.JAVA_BYTE, (long) bl * ng * 4, sc, 0, sc.length);
            for (int j = 0; j < 4 && 4 * bl + j < rows; j++) {
                for (int t = 0; t < tokens; t++) {
                    int xo = t * in;
                    double acc = 0.0;
                    for (int g = 0; g < ng; g++) {
                        int sb = sc[g * 4 + j] & 0xFF;
                        if (sb == 255) continue;
                        int i0 = g * GROUP, n = Math.min(GROUP, in - i0), base = g * gb + j;
                        // eight accumulators in locals (an array here kept every add chain in memory)
                        double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
                        int k = 0, xk = xo + i0;
                        if (int8) { // 2·E2M1 · 0.5 is E2M1 exactly (−0 reads as +0, which no sum tells apart)
                            for (; k + 8 <= n; k += 8, xk += 8) {
                                int b = base + k * 4;
                                s0 = s0 + (double) (pk[b] * 0.5f) * xd[xk];
                                s1 = s1 + (double) (pk[b + 4] * 0.5f) * xd[xk + 1];
                                s2 = s2 + (double) (pk[b + 8] * 0.5f) * xd[xk + 2];
                                s3 = s3 + (double) (pk[b + 12] * 0.5f) * xd[xk + 3];
                                s4 = s4 + (double) (pk[b + 16] * 0.5f) * xd[xk + 4];
                                s5 = s5 + (double) (pk[b + 20] * 0.5f) * xd[xk + 5];
                                s6 = s6 + (double) (pk[b + 24] * 0.5f) * xd[xk + 6];
                                s7 = s7 + (double) (pk[b + 28] * 0.5f) * xd[xk + 7];
                            }
                        } else {
                            for (; k + 8 <= n; k += 8, xk += 8) {
                                int b = base + k * 2;
                                int c0 = pk[b] & 0xFF, c1 = pk[b + 4] & 0xFF, c2 = pk[b + 8] & 0xFF, c3 = pk[b + 12] & 0xFF;
                                s0 = s0 + (double) E2M1[c0 & 15] * xd[xk];
                                s1 = s1 + (double) E2M1[c0 >>> 4] * xd[xk + 1];
                                s2 = s2 + (double) E2M1[c1 & 15] * xd[xk + 2];
                                s3 = s3 + (double) E2M1[c1 >>> 4] * xd[xk + 3];
                                s4 = s4 + (double) E2M1[c2 & 15] * xd[xk + 4];
                                s5 = s5 + (double) E2M1[c2 >>> 4] * xd[xk + 5];
                                s6 = s6 + (double) E2M1[c3 & 15] * xd[xk + 6];
                                s7 = s7 + (double) E2M1[c3 >>> 4] * xd[xk + 7];
                            }
                        }
                        double sub = ((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7));
                        for (; k < n; k++) {
                            float code;
                            if (int8) code = pk[base + k * 4] * 0.5f;
                            else {
                                int b = pk[base + (k / 2) * 4] & 0xFF;
                                code = E2M1[(k & 1) == 0 ? b & 15 : b >>> 4];
                            }
                            sub = sub + (double) code * xd[xo + i0 + k];
                        }
                        acc = acc + sub * (double) scale(sb);
                    }
                    y[t * rows + 4 * bl + j] = (float) acc;
                }
            }
        }
    }

    /** The 4 lanes of block bl, token t, into y: each row finishes its ragged last group (if any) in scalar, then rounds to float. */
    private static void storeBlock(float[] y, double[] lanes, Repacked w, int bl, int t, double[] xd) {
        int in = w.in(), rows = w.rows(), ng = groups(in), full = in / GROUP;
        for (int j = 0; j < 4; j++) {
            int r = 4 * bl + j;
            if (r >= rows) break;
            double a = lanes[j];
            if (full < ng) a = raggedGroup(a, w.packed(), w.codes(), w.scales(), bl, ng, full, j, in, xd, t * in);
            y[t * rows + r] = (float) a;
        }
    }

    /** The last, partial group of one row (scalar order of the contract) from the repacked bytes. */
    private static double raggedGroup(double acc, MemorySegment pk, Codes codes, MemorySegment sc, int bl, int ng, int g, int j, int in, double[] xd, int xo) {
        int sb = sc.get(ValueLayout.JAVA_BYTE, ((long) bl * ng + g) * 4 + j) & 0xFF;
        if (sb == 255) return acc;
        int i0 = g * GROUP, n = in - i0;
        long base = ((long) bl * ng + g) * codes.groupBytes;
        double[] s = new double[8];
        int k = 0;
        for (; k + 8 <= n; k += 8) {
            for (int l = 0; l < 8; l++) s[l] = s[l] + (double) code(pk, codes, base, j, k + l) * xd[xo + i0 + k + l];
        }
        double sub = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
        for (; k < n; k++) sub = sub + (double) code(pk, codes, base, j, k) * xd[xo + i0 + k];
        return acc + sub * (double) scale(sb);
    }

    private static float code(MemorySegment pk, Codes codes, long base, int j, int k) {
        if (codes == Codes.INT8) return pk.get(ValueLayout.JAVA_BYTE, base + k * 4L + j) * 0.5f;
        int b = pk.get(ValueLayout.JAVA_BYTE, base + (k / 2) * 4L + j) & 0xFF;
        return E2M1[(k & 1) == 0 ? b & 15 : b >>> 4];
    }
}
