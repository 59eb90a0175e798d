package k3j.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

/** The small facts the kernels stand on: E8M0 values, bf16 widening, static splits, shape checks. */
class KernelBasicsTest {

    @Test
    void e8m0ScalesAreExactPowersOfTwoAnd255ZeroesTheGroup() {
        assertEquals(1.0f, Mxfp4.scale(127));
        assertEquals(Math.scalb(1.0f, -127), Mxfp4.scale(0));
        assertEquals(Float.MIN_NORMAL / 2, Mxfp4.scale(0)); // 2^-127 is a float subnormal, exact
        assertEquals(Math.scalb(1.0f, 127), Mxfp4.scale(254));
        assertEquals(0.0f, Mxfp4.scale(255));
    }

    @Test
    void lowNibbleIsTheEvenElement() {
        byte[] packed = {(byte) 0x72}; // low 2 -> 1.0 (element 0), high 7 -> 6.0 (element 1)
        float[] w = Mxfp4.dequant(MemorySegment.ofArray(packed), MemorySegment.ofArray(new byte[] {127}), 1, 2);
        assertEquals(1.0f, w[0]);
        assertEquals(6.0f, w[1]);
    }

    @Test
    void bf16WidensIntoTheTopHalf() {
        assertEquals(1.0f, Fp.bf16(0x3F80));
        assertEquals(-2.0f, Fp.bf16(0xC000));
        assertEquals(0x3F80, Fp.toBf16(1.0f) & 0xFFFF);
    }

    @Test
    void everyOutputIsComputedByExactlyOneShare() {
        for (int threads = 1; threads <= 3; threads++) {
            try (Workers w = Workers.of(threads)) {
                for (int n : new int[] {0, 1, 2, 3, 7, 64, 129}) {
                    for (int align : new int[] {1, 2, 4}) {
                        AtomicIntegerArray seen = new AtomicIntegerArray(n);
                        w.split(n, align, (from, to) -> {
                            if (from % align != 0) throw new AssertionError("share starts at " + from + ", not a multiple of " + align);
                            for (int i = from; i < to; i++) seen.incrementAndGet(i);
                        });
                        for (int i = 0; i < n; i++) assertEquals(1, seen.get(i), "n " + n + " align " + align + " threads " + threads + " output " + i);
                    }
                }
            }
        }
    }

    @Test
    void badShapesAreRejectedWithWhatAndWhere() {
        assertThrows(IllegalArgumentException.class, () -> Matrix.bf16(new short[5], 2, 3));
        assertThrows(IllegalArgumentException.class, () -> Mxfp4.dequant(MemorySegment.ofArray(new byte[1]), MemorySegment.ofArray(new byte[1]), 1, 3));
        assertThrows(IllegalArgumentException.class, () -> new MlaKv(1, 1, 1, 1, 4).put(16, new float[2], 0, new float[1], 0));
    }
}
