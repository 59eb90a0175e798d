package k3j.kernels;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Checks the Java kernels against the C peer's dumped outputs (k3bench-out/*.bin, same splitmix64 inputs):
 * KDA has the same contract and must be bit-identical; the peer's bf16 (4-lane) and MXFP4 (one chain per
 * group) kernels use other summation orders than our contract, so for them the max ulp distance is printed.
 * usage: PeerCheck DIR
 */
public final class PeerCheck {
    private PeerCheck() {}

    static float[] read(Path p) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        float[] f = new float[b.remaining() / 4];
        b.asFloatBuffer().get(f);
        return f;
    }

    static String compare(String what, float[] java, float[] c) {
        if (java.length != c.length) return what + ": length " + java.length + " vs peer " + c.length + " MISMATCH";
        int diff = 0;
        long maxUlp = 0;
        for (int i = 0; i < java.length; i++) {
            int a = Float.floatToRawIntBits(java[i]), b = Float.floatToRawIntBits(c[i]);
            if (a != b) {
                diff++;
                long ua = a < 0 ? 0x80000000L - a : a, ub = b < 0 ? 0x80000000L - b : b;
                maxUlp = Math.max(maxUlp, Math.abs(ua - ub));
            }
        }
        return String.format("%-8s %8d outputs, %7d differ in bits, max %d ulp", what, java.length, diff, maxUlp);
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args.length > 0 ? args[0] : "k3bench-out");
        boolean ok = true;
        try (Workers w = Workers.of(2); Arena arena = Arena.ofShared()) {
            if (Files.exists(dir.resolve("kda_o.bin"))) {
                PeerInputs.KdaInputs in = PeerInputs.kda();
                float[] s = PeerInputs.kdaState(0), o = new float[PeerInputs.H * PeerInputs.D];
                Kda.stepAllHeads(w, true, s, o, in.q(), in.k(), in.v(), in.alpha(), in.beta(), PeerInputs.H, PeerInputs.D);
                String a = compare("kda o", o, read(dir.resolve("kda_o.bin"))), b = compare("kda S", s, read(dir.resolve("kda_S.bin")));
                System.out.println(a + "   (same contract: must be 0)");
                System.out.println(b + "   (same contract: must be 0)");
                ok &= a.contains(" 0 differ") && b.contains(" 0 differ");
            }
            if (Files.exists(dir.resolve("bf16_y.bin"))) {
                Matrix m = PeerInputs.bf16(arena, 12288, 7168, 12);
                float[] y = new float[12288];
                MatVec.matvec(w, y, PeerInputs.x(7168, 11), m);
                System.out.println(compare("bf16", y, read(dir.resolve("bf16_y.bin"))) + "   (peer: 4-lane order; ours: 16-accumulator tree)");
            }
            if (Files.exists(dir.resolve("mxfp4_y.bin"))) {
                PeerInputs.Expert[] ex = PeerInputs.experts();
                float[] xh = PeerInputs.x(PeerInputs.HID, 31), xi = PeerInputs.x(PeerInputs.INTER, 32);
                int per = 2 * PeerInputs.INTER + PeerInputs.HID;
                float[] all = new float[PeerInputs.EXPERTS * per];
                for (int e = 0; e < PeerInputs.EXPERTS; e++) {
                    for (int m = 0; m < 3; m++) {
                        float[] y = new float[PeerInputs.rows(m)];
                        Mxfp4.matmul(w, y, m < 2 ? xh : xi, 1, ex[e].repacked()[m]);
                        System.arraycopy(y, 0, all, e * per + (m == 0 ? 0 : m == 1 ? PeerInputs.INTER : 2 * PeerInputs.INTER), y.length);
                    }
                }
                System.out.println(compare("mxfp4", all, read(dir.resolve("mxfp4_y.bin"))) + "   (peer seed: one chain per group; ours: 8 accumulators)");
            }
        }
        if (!ok) {
            System.out.println("PEER CHECK FAILED: a same-contract kernel differs from the C peer");
            System.exit(1);
        }
    }
}
