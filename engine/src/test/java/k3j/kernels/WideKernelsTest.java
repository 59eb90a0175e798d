package k3j.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/**
 * The one-token kernels on 512-bit vectors ({@link KernelPath#wide()}) and on 256-bit ones give the reference's bits
 * (docs/fp-contract.md §2), whichever width this machine prefers: both are run here, on ragged shapes (in mod 16 and
 * in mod 32 tails, rows not a multiple of four), weights and activations over a wide exponent range (a sum in another
 * order differs: the mutant below proves the fixture sees it), MXFP4 byte-255 groups over Inf and NaN activations.
 */
class WideKernelsTest {

    static final Workers TWO = Workers.of(2);

    @AfterAll
    static void close() {
        TWO.close();
    }

    static final int[][] BF16_SHAPES = {{1, 16}, {3, 17}, {5, 31}, {7, 48}, {9, 100}, {6, 1000}, {11, 4111}, {4, 7168}};
    static final int[][] MX_SHAPES = {{4, 32}, {5, 48}, {3, 16}, {6, 18}, {7, 80}, {9, 96}, {8, 1000}, {13, 2048}, {4, 7168}};

    static float wide(SplittableRandom r) {
        return (float) (r.nextGaussian() * Math.scalb(1.0, r.nextInt(-8, 9)));
    }

    static Matrix bf16(SplittableRandom r, int rows, int in) {
        short[] w = new short[rows * in];
        for (int i = 0; i < w.length; i++) w[i] = (short) (Float.floatToRawIntBits(wide(r)) >>> 16);
        return Matrix.bf16(w, rows, in);
    }

    static float[] x(SplittableRandom r, int in) {
        float[] x = new float[in];
        for (int i = 0; i < in; i++) x[i] = wide(r);
        return x;
    }

    static void sameBits(float[] want, float[] got, String what) {
        for (int i = 0; i < want.length; i++) {
            assertEquals(Float.floatToRawIntBits(want[i]), Float.floatToRawIntBits(got[i]), what + " output " + i + ": " + want[i] + " vs " + got[i]);
        }
    }

    @Test
    void bf16OneTokenHasTheReferenceBitsAtBothWidths() {
        SplittableRandom r = new SplittableRandom(7);
        for (int[] s : BF16_SHAPES) {
            Matrix m = bf16(r, s[0], s[1]);
            float[] x = x(r, s[1]), ref = new float[s[0]];
            MatVec.reference(ref, x, 1, m);
            for (boolean wide : new boolean[] {true, false}) {
                for (Workers w : new Workers[] {Workers.serial(), TWO}) {
                    float[] y = new float[s[0]];
                    MatVec.matmul(w, y, x, 1, m, 1L << 30, wide);
                    sameBits(ref, y, "bf16 " + s[0] + "x" + s[1] + (wide ? " 512" : " 256") + " threads " + w.threads());
                }
            }
        }
    }

    /** The mutant: the same products summed by eight accumulators (a 256-bit vector's natural map) differ from the contract's. */
    @Test
    void theFixtureSeesAnotherSummationOrder() {
        SplittableRandom r = new SplittableRandom(7);
        int rows = 6, in = 1000, differ = 0;
        Matrix m = bf16(r, rows, in);
        float[] x = x(r, in), ref = new float[rows];
        MatVec.reference(ref, x, 1, m);
        for (int o = 0; o < rows; o++) {
            float[] a = new float[8];
            int i = 0;
            for (; i + 16 <= in; i += 16) for (int l = 0; l < 16; l++) a[l % 8] = Math.fma(m.get(o, i + l), x[i + l], a[l % 8]);
            float acc = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
            for (; i < in; i++) acc = Math.fma(m.get(o, i), x[i], acc);
            if (Float.floatToRawIntBits(acc) != Float.floatToRawIntBits(ref[o])) differ++;
        }
        assertNotEquals(0, differ, "an eight-accumulator sum gave the contract's bits on every row: the fixture cannot tell orders apart");
    }

    @Test
    void mxfp4OneTokenHasTheReferenceBitsAtBothWidthsAndForms() {
        SplittableRandom r = new SplittableRandom(11);
        for (int[] s : MX_SHAPES) {
            int rows = s[0], in = s[1], ng = Mxfp4.groups(in);
            byte[] p = new byte[rows * in / 2], sc = new byte[rows * ng];
            r.nextBytes(p);
            for (int i = 0; i < sc.length; i++) sc[i] = (byte) (i % 7 == 3 ? 255 : r.nextInt(119, 136));
            float[] x = x(r, in);
            // non-finite activations only under byte-255 groups of row 0 (skipped, never multiplied)
            for (int g = 0; g < ng; g++) {
                if ((sc[g] & 0xFF) == 255) {
                    for (int k = g * Mxfp4.GROUP; k < Math.min(in, (g + 1) * Mxfp4.GROUP); k++) {
                        boolean underAll = true;
                        for (int o = 0; o < rows; o++) underAll &= (sc[o * ng + g] & 0xFF) == 255;
                        if (underAll) x[k] = k % 2 == 0 ? Float.POSITIVE_INFINITY : Float.NaN;
                    }
                }
            }
            MemorySegment ps = MemorySegment.ofArray(p), ss = MemorySegment.ofArray(sc);
            float[] ref = new float[rows];
            Mxfp4.reference(ref, x, 1, ps, ss, rows, in);
            for (Mxfp4.Codes codes : Mxfp4.Codes.values()) {
                Mxfp4.Repacked w = Mxfp4.repack(ps, ss, rows, in, codes);
                for (boolean wide : new boolean[] {true, false}) {
                    for (Workers pool : new Workers[] {Workers.serial(), TWO}) {
                        float[] y = new float[rows];
                        Mxfp4.matmulVector(pool, y, x, 1, w, wide);
                        sameBits(ref, y, "mxfp4 " + codes + " " + rows + "x" + in + (wide ? " 512" : " 256") + " threads " + pool.threads());
                    }
                }
            }
        }
    }

    @Test
    void aWidthOtherThan256Or512IsRefused() {
        assertEquals(true, KernelPath.parseWidth("512"));
        assertEquals(false, KernelPath.parseWidth("256"));
        assertThrows(IllegalArgumentException.class, () -> KernelPath.parseWidth("384"));
    }
}
