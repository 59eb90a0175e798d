package k3j.kernels;

import java.lang.foreign.Arena;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;

/**
 * The fast paths at real K3 shapes, on the C peer's inputs (run ci/bench: it runs the peer in the same window
 * and prints Java/C). SampleTime: JMH reports p0 (min) and p50 (median) per call.
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 4, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "-Xmx8g", "-XX:+UseParallelGC", "-XX:+AlwaysPreTouch"})
public class KernelBench {

    @State(Scope.Benchmark)
    public static class Pool {
        @Param({"1", "2"})
        public int threads;

        Workers workers;

        @Setup(Level.Trial)
        public void up() {
            workers = Workers.of(threads);
        }

        @TearDown(Level.Trial)
        public void down() {
            workers.close();
        }
    }

    /** A bf16 weight matrix of {@code rows} x 7168 from the peer's generator, {@code tokens} inputs and their outputs. */
    public abstract static class Bf16Matrix {
        final Arena arena = Arena.ofShared();
        Matrix w;
        float[] x, y;

        void fill(int rows, int tokens, long weightSeed, long inputSeed) {
            w = PeerInputs.bf16(arena, rows, 7168, weightSeed);
            x = PeerInputs.x(7168 * tokens, inputSeed);
            y = new float[rows * tokens];
        }

        @TearDown(Level.Trial)
        public void down() {
            arena.close();
        }
    }

    @State(Scope.Benchmark)
    public static class Bf16 extends Bf16Matrix {
        @Setup(Level.Trial)
        public void up() {
            fill(12288, 1, 12, 11);
        }
    }

    @State(Scope.Benchmark)
    public static class LmHead extends Bf16Matrix {
        @Setup(Level.Trial)
        public void up() {
            fill(163840, 1, 22, 21);
        }
    }

    @State(Scope.Benchmark)
    public static class Prefill extends Bf16Matrix {
        @Param({"8", "64"})
        public int tokens;

        @Setup(Level.Trial)
        public void up() {
            fill(12288, tokens, 12, 11);
        }
    }

    @State(Scope.Benchmark)
    public static class Experts {
        PeerInputs.Expert[] ex;
        float[] xh, xi, y;

        @Setup(Level.Trial)
        public void up() {
            ex = PeerInputs.experts();
            xh = PeerInputs.x(PeerInputs.HID, 31);
            xi = PeerInputs.x(PeerInputs.INTER, 32);
            y = new float[PeerInputs.HID];
        }
    }

    @State(Scope.Benchmark)
    public static class KdaStep {
        PeerInputs.KdaInputs in;
        float[] state, o;

        @Setup(Level.Trial)
        public void up() {
            in = PeerInputs.kda();
            state = PeerInputs.kdaState(0);
            o = new float[PeerInputs.H * PeerInputs.D];
        }
    }

    @State(Scope.Benchmark)
    public static class KdaLayers {
        PeerInputs.KdaInputs in;
        float[][] states = new float[16][];
        float[] o;

        @Setup(Level.Trial)
        public void up() {
            in = PeerInputs.kda();
            for (int l = 0; l < 16; l++) states[l] = PeerInputs.kdaState(l);
            o = new float[PeerInputs.H * PeerInputs.D];
        }
    }

    @State(Scope.Benchmark)
    public static class Mla {
        @Param({"1024", "8192"})
        public int positions;

        MlaKv kv;
        float[] q, out;
        float scale;

        @Setup(Level.Trial)
        public void up() {
            int h = 96, nope = 128, rope = 64, value = 128;
            kv = new MlaKv(h, nope, rope, value, positions);
            PeerInputs.SplitMix r = new PeerInputs.SplitMix(77);
            float[] row = new float[h * (nope + value)], rk = new float[rope];
            for (int s = 0; s < positions; s++) {
                for (int i = 0; i < row.length; i++) row[i] = (r.unit() - 0.5f) * 2;
                for (int i = 0; i < rope; i++) rk[i] = (r.unit() - 0.5f) * 2;
                kv.put(s, row, 0, rk, 0);
            }
            q = PeerInputs.x(h * (nope + rope), 78);
            out = new float[h * value];
            scale = MlaAttention.scale(nope, rope);
        }
    }

    @Benchmark
    public float[] bf16_7168x12288(Pool p, Bf16 s) {
        MatVec.matvec(p.workers, s.y, s.x, s.w);
        return s.y;
    }

    @Benchmark
    public float[] lmhead_7168x163840(Pool p, LmHead s) {
        MatVec.matvec(p.workers, s.y, s.x, s.w);
        return s.y;
    }

    @Benchmark
    public float[] prefill_bf16_7168x12288(Pool p, Prefill s) {
        MatVec.matmul(p.workers, s.y, s.x, s.tokens, s.w);
        return s.y;
    }

    /** 16 distinct experts x (gate 3584->3072, up 3584->3072, down 3072->3584), 17.5 MB each, 280 MB. */
    @Benchmark
    public void mxfp4_16experts(Pool p, Experts s, Blackhole bh) {
        for (PeerInputs.Expert e : s.ex) {
            for (int m = 0; m < 3; m++) {
                Mxfp4.matmul(p.workers, s.y, m < 2 ? s.xh : s.xi, 1, e.repacked()[m]);
                bh.consume(s.y);
            }
        }
    }

    /** 96 heads x 128x128 state, hot in L3 (the state keeps evolving; the work per call is fixed). */
    @Benchmark
    public float[] kda_96x128x128_hot(Pool p, KdaStep s) {
        Kda.stepAllHeads(p.workers, true, s.state, s.o, s.in.q(), s.in.k(), s.in.v(), s.in.alpha(), s.in.beta(), PeerInputs.H, PeerInputs.D);
        return s.o;
    }

    /** 16 layers of KDA state (100 MB), streamed from DRAM. */
    @Benchmark
    public float[] kda_16layers_dram(Pool p, KdaLayers s) {
        for (float[] st : s.states) Kda.stepAllHeads(p.workers, true, st, s.o, s.in.q(), s.in.k(), s.in.v(), s.in.alpha(), s.in.beta(), PeerInputs.H, PeerInputs.D);
        return s.o;
    }

    /** One query token against {positions} cached positions, 96 heads, K3 geometry. */
    @Benchmark
    public float[] mla_attention(Pool p, Mla s) {
        MlaAttention.attend(p.workers, true, s.out, 0, s.q, 0, s.kv, s.positions - 1, s.scale);
        return s.out;
    }
}
