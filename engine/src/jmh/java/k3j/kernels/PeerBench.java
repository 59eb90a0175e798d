package k3j.kernels;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;

/**
 * The Java side of ci/bench's kernel rows: the kernels of bench/peer/peer.c on the same inputs ({@link PeerInputs}),
 * timed the same way (warm-up calls, then timed calls up to a count or a time budget; min and median), each output
 * checked bit for bit against the peer's dump first (same contract, so 0 outputs may differ).
 * MXFP4 runs twice: nibble codes (the default form) and int8-predecoded codes.
 *
 * <p>usage: PeerBench PEER_OUT_DIR THREADS [bf16|mxfp4|kda_hot|kda_dram|lmhead ...]; prints
 * {@code JAVA <kernel> <threads> min <ms> median <ms> reps <n>} and {@code CHECK <kernel> <outputs> differ <n>}.
 */
public final class PeerBench {
    private PeerBench() {}

    interface Kernel {
        void run();
    }

    static void time(String name, int threads, Kernel k, int warm, int reps, double budgetMs) {
        for (int i = 0; i < warm; i++) k.run();
        double[] t = new double[reps];
        long start = System.nanoTime();
        int n = 0;
        while (n < reps && (n < 3 || (System.nanoTime() - start) / 1e6 < budgetMs)) {
            long t0 = System.nanoTime();
            k.run();
            t[n++] = (System.nanoTime() - t0) / 1e6;
        }
        double[] s = Arrays.copyOf(t, n);
        Arrays.sort(s);
        System.out.printf("JAVA %s %d min %.4f median %.4f reps %d%n", name, threads, s[0], s[n / 2], n);
        System.out.flush();
    }

    static float[] read(Path p) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        float[] f = new float[b.remaining() / 4];
        b.asFloatBuffer().get(f);
        return f;
    }

    /** Prints the CHECK line; false when an output differs from the peer's in any bit (or the dump is missing). */
    static boolean check(String what, float[] java, Path peerDump) throws IOException {
        if (!Files.exists(peerDump)) {
            System.out.printf("CHECK %s %d differ all (no peer dump %s)%n", what, java.length, peerDump.getFileName());
            return false;
        }
        float[] c = read(peerDump);
        int diff = java.length == c.length ? 0 : Math.max(java.length, c.length);
        for (int i = 0; i < Math.min(java.length, c.length); i++) {
            if (Float.floatToRawIntBits(java[i]) != Float.floatToRawIntBits(c[i])) diff++;
        }
        System.out.printf("CHECK %s %d differ %d%n", what, java.length, diff);
        return diff == 0;
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        int threads = Integer.parseInt(args[1]);
        List<String> want = args.length > 2 ? List.of(args).subList(2, args.length) : List.of("bf16", "mxfp4", "kda_hot", "kda_dram", "lmhead");
        boolean ok = true;
        KernelPath.set(KernelPath.Mode.VECTOR);
        try (Workers w = Workers.of(threads)) {
            if (want.contains("bf16")) ok &= matvec(w, threads, "bf16", 12288, 12, 40, 40, 2500, dir);
            if (want.contains("mxfp4")) {
                for (Mxfp4.Codes codes : Mxfp4.Codes.values()) ok &= mxfp4(w, threads, codes, dir);
            }
            if (want.contains("kda_hot") || want.contains("kda_dram")) {
                PeerInputs.KdaInputs in = PeerInputs.kda();
                float[] o = new float[PeerInputs.H * PeerInputs.D];
                if (want.contains("kda_hot")) {
                    float[] s = PeerInputs.kdaState(0);
                    Kda.stepAllHeads(w, true, s, o, in.q(), in.k(), in.v(), in.alpha(), in.beta(), PeerInputs.H, PeerInputs.D);
                    ok &= check("kda_o", o, dir.resolve("kda_o.bin"));
                    ok &= check("kda_S", s, dir.resolve("kda_S.bin"));
                    time("kda_hot", threads, () -> Kda.stepAllHeads(w, true, s, o, in.q(), in.k(), in.v(), in.alpha(), in.beta(), PeerInputs.H, PeerInputs.D),
                            200, 400, 1500);
                }
                if (want.contains("kda_dram")) {
                    float[][] layers = new float[16][];
                    for (int l = 0; l < 16; l++) layers[l] = PeerInputs.kdaState(l);
                    int[] at = {0};
                    Kernel step = () -> {
                        float[] s = layers[at[0]];
                        at[0] = (at[0] + 1) % layers.length;
                        Kda.stepAllHeads(w, true, s, o, in.q(), in.k(), in.v(), in.alpha(), in.beta(), PeerInputs.H, PeerInputs.D);
                    };
                    time("kda_dram", threads, step, 64, 160, 2000);
                }
            }
            if (want.contains("lmhead")) ok &= matvec(w, threads, "lmhead", 163840, 13, 3, 6, 3000, dir);
        }
        if (!ok) {
            System.out.println("PEER CHECK FAILED: a Java kernel differs from the C peer under the same contract");
            System.exit(1);
        }
    }

    /** A bf16 matvec of {@code rows} x 7168 (the peer's matrix of {@code seed}), checked, then timed. */
    static boolean matvec(Workers w, int threads, String name, int rows, long seed, int warm, int reps, double budgetMs, Path dir) throws IOException {
        try (Arena a = Arena.ofShared()) {
            Matrix m = PeerInputs.bf16(a, rows, 7168, seed);
            float[] x = PeerInputs.x(7168, 11), y = new float[rows];
            MatVec.matvec(w, y, x, m);
            boolean same = check(name, y, dir.resolve(name + "_y.bin"));
            time(name, threads, () -> MatVec.matvec(w, y, x, m), warm, reps, budgetMs);
            return same;
        }
    }

    /** The peer's 16 experts (gate, up, down) repacked off-heap in {@code codes} form, run as one token. */
    static boolean mxfp4(Workers w, int threads, Mxfp4.Codes codes, Path dir) throws IOException {
        int e = PeerInputs.EXPERTS, hid = PeerInputs.HID, inter = PeerInputs.INTER, per = 2 * inter + hid;
        try (Arena a = Arena.ofShared()) {
            Mxfp4.Repacked[][] ex = new Mxfp4.Repacked[e][3];
            for (int i = 0; i < e; i++) {
                for (int m = 0; m < 3; m++) {
                    int rows = PeerInputs.rows(m), cols = PeerInputs.cols(m);
                    MemorySegment p = PeerInputs.bytes(rows * cols / 2, 1000 + i * 10 + m), s = PeerInputs.scales(rows * cols / 32, 2000 + i * 10 + m);
                    ex[i][m] = Mxfp4.repackInto(p, s, rows, cols, codes, a.allocate(Mxfp4.packedBytes(rows, cols, codes), 64),
                            a.allocate(Mxfp4.scaleBytes(rows, cols), 64));
                }
            }
            float[] xh = PeerInputs.x(hid, 31), xi = PeerInputs.x(inter, 32), all = new float[e * per];
            float[][] ys = {new float[inter], new float[inter], new float[hid]};
            Kernel run = () -> {
                for (int i = 0; i < e; i++) {
                    for (int m = 0; m < 3; m++) {
                        Mxfp4.matmul(w, ys[m], m < 2 ? xh : xi, 1, ex[i][m]);
                        System.arraycopy(ys[m], 0, all, i * per + (m == 0 ? 0 : m == 1 ? inter : 2 * inter), ys[m].length);
                    }
                }
            };
            run.run();
            String name = codes == Mxfp4.Codes.NIBBLES ? "mxfp4" : "mxfp4_int8";
            boolean same = check(name, all, dir.resolve("mxfp4_y.bin"));
            time(name, threads, run, 6, 12, 3000);
            return same;
        }
    }
}
