package k3j.model;

import k3j.Repo;
import java.util.concurrent.TimeUnit;
import k3j.kernels.Argmax;
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
 * Tokens/s of the whole forward on the tiny oracle (oracle-fixtures/tiny-k3): prefill of the 12-id prompt
 * (one batched forward; tokens/s = 12 / time) and one incremental decode step (one token against a KV cache
 * of 12..~1000 positions, reset every iteration).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
public class TinyOracleBench {
    static final int[] PROMPT = {250, 17, 101, 3, 199, 64, 128, 42, 7, 230, 88, 155};

    @Param({"1", "2"})
    int threads;

    Model model;
    Workers workers;
    Forward forward;
    DecodeState state;
    int next;

    @Setup(Level.Trial)
    public void open() {
        model = Model.open(Repo.path("oracle-fixtures/tiny-k3"));
        workers = Workers.of(threads);
        forward = model.forward(workers);
    }

    @Setup(Level.Iteration)
    public void prefill() {
        state = DecodeState.create(model.weights(), 1 << 15);
        Forward.Result r = forward.step(PROMPT, state, false, null);
        next = Argmax.fast(r.logits(), 0, r.logits().length);
    }

    @TearDown(Level.Trial)
    public void close() {
        workers.close();
        model.close();
    }

    /** The 12-token prompt in one forward (full recompute, all layers batched). */
    @Benchmark
    public float[] prefill12() {
        return forward.full(PROMPT, false, null).logits();
    }

    /** One greedy decode step. */
    @Benchmark
    public int decodeStep() {
        if (state.cached() + 1 >= state.capacity()) prefill();
        Forward.Result r = forward.step(new int[] {next}, state, false, null);
        next = Argmax.fast(r.logits(), 0, r.logits().length);
        return next;
    }
}
