package k3j.model;

import k3j.Repo;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import k3j.cache.ExpertLocation;
import k3j.cache.ExpertSource;
import k3j.cache.ResidentExpert;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.kernels.Fp;
import k3j.kernels.Layers;
import k3j.kernels.Matrix;
import k3j.kernels.MlaKv;
import k3j.kernels.Mxfp4;
import k3j.kernels.WeightType;
import k3j.kernels.Workers;
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

/**
 * Per-token time of one real-width (7168) layer of each kind with random weights made in memory (released
 * K3 geometry from oracle-fixtures/config/released.json): the KDA token mixer with carried state, the MLA
 * token mixer at 1K context (1024 cached positions), and LatentMoE with real expert shapes (896-way router,
 * top-16, latent 3584, intermediate 3072, shared 6144) over a handful (16) of resident MXFP4 experts.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 4, time = 3)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector", "-Xmx4g"})
public class RealLayerBench {
    static final int HANDFUL = 16;

    static ModelConfig released() {
        return ConfigReader.read(Repo.path("oracle-fixtures/config/released.json"));
    }

    /** Random bf16 values in ±0.05 (a 1 MiB pattern repeated: random enough, fast to make). */
    static Matrix bf16(Arena a, int rows, int cols, long seed) {
        Matrix m = Matrix.allocate(a, WeightType.BF16, rows, cols);
        fill(m.data(), seed, r -> Fp.toBf16((float) (r.nextDouble() * 0.1 - 0.05)), 2);
        return m;
    }

    interface Gen {
        short next(SplittableRandom r);
    }

    static void fill(MemorySegment s, long seed, Gen g, int bytes) {
        SplittableRandom r = new SplittableRandom(seed);
        long pattern = Math.min(s.byteSize(), 1 << 20);
        for (long i = 0; i + bytes <= pattern; i += bytes) {
            if (bytes == 2) s.set(ValueLayout.JAVA_SHORT_UNALIGNED, i, g.next(r));
            else s.set(ValueLayout.JAVA_BYTE, i, (byte) g.next(r));
        }
        for (long at = pattern; at < s.byteSize(); at += pattern) MemorySegment.copy(s, 0, s, at, Math.min(pattern, s.byteSize() - at));
    }

    static float[] floats(int n, long seed, double lo, double hi) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] f = new float[n];
        for (int i = 0; i < n; i++) f[i] = (float) (lo + r.nextDouble() * (hi - lo));
        return f;
    }

    @State(Scope.Benchmark)
    public static class Common {
        @Param({"2"})
        int threads;

        ModelConfig c;
        Workers workers;
        Arena arena;
        float[] x;

        @Setup(Level.Trial)
        public void setup() {
            c = released();
            workers = Workers.of(threads);
            arena = Arena.ofShared();
            x = floats(c.hiddenSize(), 1, -1, 1);
        }

        @TearDown(Level.Trial)
        public void close() {
            workers.close();
            arena.close();
        }
    }

    @State(Scope.Benchmark)
    public static class Kda {
        Layers.KdaWeights w;
        Layers.KdaState state;
        float[] out;

        @Setup(Level.Trial)
        public void setup(Common cm) {
            ModelConfig c = cm.c;
            int e = c.hiddenSize(), h = c.kdaHeads(), d = c.kdaHeadDim(), p = h * d, k = c.shortConvKernel();
            w = new Layers.KdaWeights(bf16(cm.arena, p, e, 11), bf16(cm.arena, p, e, 12), bf16(cm.arena, p, e, 13), bf16(cm.arena, h, e, 14),
                    bf16(cm.arena, d, e, 15), bf16(cm.arena, p, d, 16), bf16(cm.arena, p, e, 17), bf16(cm.arena, e, p, 18),
                    floats(p * k, 19, -0.5, 0.5), floats(p * k, 20, -0.5, 0.5), floats(p * k, 21, -0.5, 0.5),
                    floats(h, 22, -1, 1), floats(p, 23, -1, 1), floats(d, 24, 0.8, 1.2), h, d, k, c.gateLowerBound(), c.rmsNormEps());
            state = DecodeState.newKdaState(w);
            out = new float[e];
        }
    }

    @State(Scope.Benchmark)
    public static class Mla {
        static final int CONTEXT = 1024;
        Layers.MlaWeights w;
        MlaKv kv;
        float[] out;

        @Setup(Level.Trial)
        public void setup(Common cm) {
            ModelConfig c = cm.c;
            int e = c.hiddenSize(), hm = c.mlaHeads(), ql = c.qLoraRank(), kvl = c.kvLoraRank();
            w = new Layers.MlaWeights(bf16(cm.arena, ql, e, 31), floats(ql, 32, 0.8, 1.2), bf16(cm.arena, hm * c.mlaQkHeadDim(), ql, 33),
                    bf16(cm.arena, c.mlaKvAWidth(), e, 34), floats(kvl, 35, 0.8, 1.2), bf16(cm.arena, hm * c.mlaKvHeadDim(), kvl, 36),
                    bf16(cm.arena, hm * c.vHeadDim(), e, 37), bf16(cm.arena, e, hm * c.vHeadDim(), 38),
                    hm, c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim());
            kv = new MlaKv(hm, c.qkNopeHeadDim(), c.qkRopeHeadDim(), c.vHeadDim(), CONTEXT + 1);
            float[] row = floats(hm * c.mlaKvHeadDim(), 39, -1, 1), rope = floats(c.qkRopeHeadDim(), 40, -1, 1);
            for (int s = 0; s < CONTEXT; s++) kv.put(s, row, 0, rope, 0);
            out = new float[e];
        }
    }

    @State(Scope.Benchmark)
    public static class Moe {
        Forward forward, resident, cacheHit, cacheHitInt8;
        Mlp.LatentMoe m;
        int[] idx;
        float[] wts, out;

        @Setup(Level.Trial)
        public void setup(Common cm) {
            ModelConfig c = cm.c;
            int e = c.hiddenSize(), n = c.expertCount(), lt = c.latentSize(), in = c.moeIntermediate(), si = c.sharedIntermediate();
            m = new Mlp.LatentMoe(bf16(cm.arena, n, e, 51), floats(n, 52, 0, 0.01), bf16(cm.arena, lt, e, 53), bf16(cm.arena, e, lt, 54),
                    floats(lt, 55, 0.8, 1.2), new Layers.MlpWeights(bf16(cm.arena, si, e, 56), bf16(cm.arena, si, e, 57), bf16(cm.arena, e, si, 58),
                    c.situBeta(), c.situLinearBeta()), n, c.topK(), lt, in, c.moeRenormalize(), c.latentNorm(), c.routedScalingFactor(),
                    c.rmsNormEps(), c.situBeta(), c.situLinearBeta());
            long[] len = {(long) in * lt / 2, (long) in * lt / 32, (long) lt * in / 2, (long) lt * in / 32, (long) in * lt / 2, (long) in * lt / 32};
            long[] off = new long[6];
            long total = 0;
            for (int i = 0; i < 6; i++) {
                off[i] = total;
                total += len[i];
            }
            ResidentExpert[] handful = new ResidentExpert[HANDFUL];
            for (int h = 0; h < HANDFUL; h++) {
                MemorySegment b = cm.arena.allocate(total, 64);
                fill(b, 60 + h, r -> (short) r.nextInt(256), 1);
                for (int i = 1; i < 6; i += 2) fill(b.asSlice(off[i], len[i]), 80 + h, r -> (short) (116 + r.nextInt(6)), 1);
                handful[h] = new ResidentExpert(1, h, b, ExpertLocation.contiguous(Path.of("memory"), 0, off, len));
            }
            ExpertSource src = new ExpertSource() {
                @Override
                public ResidentExpert get(int layer, int expert) {
                    return handful[expert % HANDFUL];
                }

                @Override
                public int getMany(int layer, int... experts) {
                    return 0;
                }
            };
            ModelWeights mw = new ModelWeights(c, null, List.of(), null, null, null);
            forward = new Forward(mw, src, cm.workers, false);
            resident = new Forward(mw, src, cm.workers, true);
            cacheHit = new Forward(mw, formed(cm.arena, handful, new KernelExperts(in, lt, Mxfp4.Codes.NIBBLES)), cm.workers, false);
            cacheHitInt8 = new Forward(mw, formed(cm.arena, handful, new KernelExperts(in, lt, Mxfp4.Codes.INT8)), cm.workers, false);
            idx = new int[c.topK()];
            wts = new float[c.topK()];
            out = new float[e];
        }
    }

    /** The handful as an expert cache's slots hold them after the fill: in {@code form}, handed out as they are. */
    static ExpertSource formed(Arena arena, ResidentExpert[] handful, KernelExperts form) {
        ResidentExpert[] held = new ResidentExpert[handful.length];
        for (int h = 0; h < handful.length; h++) {
            MemorySegment dst = arena.allocate(form.bytes(handful[h].location()), 64);
            form.fill(handful[h].location(), handful[h].bytes(), dst);
            held[h] = new ResidentExpert(handful[h].layer(), handful[h].expert(), dst, handful[h].location(), form);
        }
        return new ExpertSource() {
            @Override
            public ResidentExpert get(int layer, int expert) {
                return held[expert % held.length];
            }

            @Override
            public int getMany(int layer, int... experts) {
                return 0;
            }
        };
    }

    /** KDA token mixer, one decode token (carried recurrent + conv state). */
    @Benchmark
    public float[] kdaMixer(Common cm, Kda k) {
        Layers.kda(cm.workers, true, k.out, cm.x, 1, k.w, k.state);
        return k.out;
    }

    /** MLA token mixer, one decode token at position 1024 (attends over 1025 positions). */
    @Benchmark
    public float[] mlaMixerAt1K(Common cm, Mla m) {
        Layers.mla(cm.workers, true, m.out, cm.x, 1, m.w, m.kv, Mla.CONTEXT);
        return m.out;
    }

    /** LatentMoE, one token: route over 896, 16 MXFP4 experts repacked on every call (a source holding stored bytes), shared MLP. */
    @Benchmark
    public float[] latentMoeRepackPerCall(Common cm, Moe m) {
        m.forward.moe(1, m.m, m.out, m.idx, m.wts, cm.x, 1);
        return m.out;
    }

    /** LatentMoE, one token, experts resident in their repacked form (the fast path's steady state). */
    @Benchmark
    public float[] latentMoeResident(Common cm, Moe m) {
        m.resident.moe(1, m.m, m.out, m.idx, m.wts, cm.x, 1);
        return m.out;
    }

    /** LatentMoE, one token, experts served as cache hits: the slot holds the repacked form made at fill (nibble codes). */
    @Benchmark
    public float[] latentMoeCacheHit(Common cm, Moe m) {
        m.cacheHit.moe(1, m.m, m.out, m.idx, m.wts, cm.x, 1);
        return m.out;
    }

    /** As {@link #latentMoeCacheHit}, the slots holding int8-predecoded codes (twice the bytes). */
    @Benchmark
    public float[] latentMoeCacheHitInt8(Common cm, Moe m) {
        m.cacheHitInt8.moe(1, m.m, m.out, m.idx, m.wts, cm.x, 1);
        return m.out;
    }
}
