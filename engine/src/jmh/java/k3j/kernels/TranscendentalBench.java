package k3j.kernels;

import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/** What the contract's StrictMath transcendentals cost against the Math intrinsics (ns per element). */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
@State(Scope.Benchmark)
public class TranscendentalBench {
    static final int N = 4096;
    float[] x = new float[N], y = new float[N];

    @Setup(Level.Trial)
    public void up() {
        java.util.SplittableRandom r = new java.util.SplittableRandom(1);
        for (int i = 0; i < N; i++) x[i] = (float) (r.nextDouble() * 20 - 10);
    }

    @Benchmark
    @OperationsPerInvocation(N)
    public float[] exp_strict() {
        for (int i = 0; i < N; i++) y[i] = (float) StrictMath.exp(x[i]);
        return y;
    }

    @Benchmark
    @OperationsPerInvocation(N)
    public float[] exp_math() {
        for (int i = 0; i < N; i++) y[i] = (float) Math.exp(x[i]);
        return y;
    }

    @Benchmark
    @OperationsPerInvocation(N)
    public float[] tanh_strict() {
        for (int i = 0; i < N; i++) y[i] = (float) StrictMath.tanh(x[i]);
        return y;
    }

    @Benchmark
    @OperationsPerInvocation(N)
    public float[] tanh_math() {
        for (int i = 0; i < N; i++) y[i] = (float) Math.tanh(x[i]);
        return y;
    }

    /** The contract's sigmoid: 1 / (1 + exp(-x)) with StrictMath. */
    @Benchmark
    @OperationsPerInvocation(N)
    public float[] sigmoid_strict() {
        for (int i = 0; i < N; i++) y[i] = Fp.sigmoid(x[i]);
        return y;
    }

    @Benchmark
    @OperationsPerInvocation(N)
    public float[] sigmoid_math() {
        for (int i = 0; i < N; i++) y[i] = 1.0f / (1.0f + (float) Math.exp(-x[i]));
        return y;
    }

    /** One SiTU-GLU element (2 tanh + 1 exp): the cost per MLP activation. */
    @Benchmark
    @OperationsPerInvocation(N)
    public float[] situ_strict() {
        Activations.situGlu(y, x, x, N, 4.0f, 25.0f);
        return y;
    }
}
