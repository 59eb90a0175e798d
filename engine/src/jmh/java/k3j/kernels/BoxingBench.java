package k3j.kernels;

import java.lang.foreign.Arena;

/**
 * The kernels at real width, back to back, as ci/bench-boxing runs them under JFR: each round is one bf16
 * 7168 x 12288 matvec, one 8-token product of the same matrix, the 16 experts' 48 MXFP4 matvecs and the same for 4
 * tokens, one KDA step of 96 heads (128 x 128 state). Prints {@code ROUND r START epoch-ms END epoch-ms <kernel> ms ...} so the script can sort JFR's allocation
 * samples into rounds.
 *
 * <p>usage: BoxingBench ROUNDS THREADS
 */
public final class BoxingBench {
    private BoxingBench() {}

    public static void main(String[] args) {
        if (args.length != 2) throw new IllegalArgumentException("usage: BoxingBench ROUNDS THREADS");
        int rounds = Integer.parseInt(args[0]), threads = Integer.parseInt(args[1]);
        try (Arena arena = Arena.ofShared(); Workers workers = Workers.of(threads)) {
            Matrix w = PeerInputs.bf16(arena, 12288, 7168, 12);
            float[] x = PeerInputs.x(7168 * 8, 11), y = new float[12288 * 8];
            PeerInputs.Expert[] experts = PeerInputs.experts();
            float[] xh = PeerInputs.x(PeerInputs.HID * 4, 31), xi = PeerInputs.x(PeerInputs.INTER * 4, 32);
            float[] ye = new float[PeerInputs.HID * 4];
            PeerInputs.KdaInputs kda = PeerInputs.kda();
            float[] state = PeerInputs.kdaState(0), o = new float[PeerInputs.H * PeerInputs.D];
            for (int r = 0; r < rounds; r++) {
                long start = System.currentTimeMillis();
                long t0 = System.nanoTime();
                MatVec.matvec(workers, y, x, w);
                long t1 = System.nanoTime();
                MatVec.matmul(workers, y, x, 8, w);
                long t2 = System.nanoTime();
                for (PeerInputs.Expert e : experts) {
                    for (int m = 0; m < 3; m++) Mxfp4.matmul(workers, ye, m < 2 ? xh : xi, 1, e.repacked()[m]);
                }
                long t3 = System.nanoTime();
                for (PeerInputs.Expert e : experts) {
                    for (int m = 0; m < 3; m++) Mxfp4.matmul(workers, ye, m < 2 ? xh : xi, 4, e.repacked()[m]);
                }
                long t4 = System.nanoTime();
                Kda.stepAllHeads(workers, true, state, o, kda.q(), kda.k(), kda.v(), kda.alpha(), kda.beta(), PeerInputs.H, PeerInputs.D);
                long t5 = System.nanoTime();
                System.out.printf("ROUND %d START %d END %d bf16 %.1f bf16x8 %.1f mxfp4 %.1f mxfp4x4 %.1f kda %.1f%n", r, start,
                        System.currentTimeMillis(), (t1 - t0) / 1e6, (t2 - t1) / 1e6, (t3 - t2) / 1e6, (t4 - t3) / 1e6, (t5 - t4) / 1e6);
                System.out.flush();
            }
        }
    }
}
