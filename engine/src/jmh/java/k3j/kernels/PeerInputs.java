package k3j.kernels;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The C peer's deterministic inputs (its common.h: splitmix64 streams), mirrored bit for bit so the
 * Java kernels can be checked against the peer's dumped outputs and timed on the same data.
 */
final class PeerInputs {
    private PeerInputs() {}

    static final class SplitMix {
        long s;

        SplitMix(long seed) {
            s = seed;
        }

        long next() {
            long z = (s += 0x9E3779B97F4A7C15L);
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }

        float unit() {
            return (float) (next() >>> 40) * (1.0f / 16777216.0f);
        }
    }

    /** gen_x: uniform in [-2, 2). */
    static float[] x(int n, long seed) {
        SplitMix r = new SplitMix(seed);
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (r.unit() - 0.5f) * 4.0f;
        return x;
    }

    /** gen_bf16 into an off-heap bf16 matrix [rows][cols]. */
    static Matrix bf16(Arena arena, int rows, int cols, long seed) {
        Matrix m = Matrix.allocate(arena, WeightType.BF16, rows, cols);
        MemorySegment seg = m.data();
        SplitMix r = new SplitMix(seed);
        long n = (long) rows * cols;
        for (long i = 0; i < n; i += 4) {
            long v = r.next();
            for (int j = 0; j < 4; j++) {
                int h = (int) (v >>> (16 * j)) & 0xFFFF;
                seg.setAtIndex(Matrix.BF16, i + j, (short) (((h >>> 15) << 15) | ((117 + ((h >>> 7) & 7)) << 7) | (h & 0x7F)));
            }
        }
        return m;
    }

    /** gen_bytes. */
    static MemorySegment bytes(int n, long seed) {
        byte[] b = new byte[n];
        SplitMix r = new SplitMix(seed);
        for (int i = 0; i < n; i += 8) {
            long v = r.next();
            for (int j = 0; j < 8; j++) b[i + j] = (byte) (v >>> (8 * j));
        }
        return MemorySegment.ofArray(b);
    }

    /** gen_scales: 120..127, and 255 for 1/256 of the groups. */
    static MemorySegment scales(int n, long seed) {
        MemorySegment s = bytes(n, seed);
        for (long i = 0; i < n; i++) {
            int b = s.get(ValueLayout.JAVA_BYTE, i) & 0xFF;
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (b == 0 ? 255 : 120 + (b & 7)));
        }
        return s;
    }

    /** The peer's 16 experts: [expert][gate, up, down] canonical and repacked. */
    static final int EXPERTS = 16, HID = 3584, INTER = 3072;

    record Expert(MemorySegment[] packed, MemorySegment[] scales, Mxfp4.Repacked[] repacked) {}

    static int rows(int m) {
        return m < 2 ? INTER : HID;
    }

    static int cols(int m) {
        return m < 2 ? HID : INTER;
    }

    static Expert[] experts() {
        Expert[] ex = new Expert[EXPERTS];
        for (int e = 0; e < EXPERTS; e++) {
            MemorySegment[] p = new MemorySegment[3], s = new MemorySegment[3];
            Mxfp4.Repacked[] rp = new Mxfp4.Repacked[3];
            for (int m = 0; m < 3; m++) {
                int rows = rows(m), cols = cols(m);
                p[m] = bytes(rows * cols / 2, 1000 + e * 10 + m);
                s[m] = scales(rows * cols / 32, 2000 + e * 10 + m);
                rp[m] = Mxfp4.repack(p[m], s[m], rows, cols);
            }
            ex[e] = new Expert(p, s, rp);
        }
        return ex;
    }

    /** KDA: 96 heads of 128x128 state; k zeros every 37, q zeros every 41 from 5 (the skip branches). */
    static final int H = 96, D = 128;

    record KdaInputs(float[] q, float[] k, float[] v, float[] alpha, float[] beta) {}

    static float[] kdaState(int layer) {
        SplitMix r = new SplitMix(500 + layer);
        float[] s = new float[H * D * D];
        for (int i = 0; i < s.length; i++) s[i] = (r.unit() - 0.5f) * 0.5f;
        return s;
    }

    static KdaInputs kda() {
        float[] q = x(H * D, 41), k = x(H * D, 42), v = x(H * D, 43), al = new float[H * D], beta = new float[H];
        SplitMix r = new SplitMix(44);
        for (int i = 0; i < al.length; i++) al[i] = 0.9f + 0.1f * r.unit();
        r = new SplitMix(45);
        for (int h = 0; h < H; h++) beta[h] = r.unit();
        for (int i = 0; i < H * D; i += 37) k[i] = 0.0f;
        for (int i = 5; i < H * D; i += 41) q[i] = 0.0f;
        return new KdaInputs(q, k, v, al, beta);
    }
}
