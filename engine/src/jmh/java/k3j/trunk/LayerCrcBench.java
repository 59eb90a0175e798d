package k3j.trunk;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
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

/**
 * The cost of verifying a streamed layer: CRC-32C ({@link LayerCrc}) over an off-heap run, against a plain read
 * of the same bytes (a long-wise XOR, what touching the memory costs anyway). Sizes: a mini-k3-93 layer run
 * (~40 KB) and 256 MiB, a fifth of a real-width K3 layer's non-expert run (about 1.26 GB for a KDA + LatentMoE
 * layer at hidden 7168): the per-byte figure scales, and a whole one would not fit beside other work on a small machine.
 *   ci/bench-crc (or: mvn -Pbench -pl engine test-compile, then JMH on k3j.trunk.LayerCrcBench)
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"-Xmx512m"})
public class LayerCrcBench {
    @Param({"40960", "268435456"})
    long bytes;

    Arena arena;
    MemorySegment run;

    @Setup(Level.Trial)
    public void setUp() {
        arena = Arena.ofShared();
        run = arena.allocate(bytes, 4096);
        SplittableRandom r = new SplittableRandom(42);
        for (long i = 0; i < bytes; i += 8) run.set(ValueLayout.JAVA_LONG_UNALIGNED, i, r.nextLong());
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public int crc32c() {
        return LayerCrc.of(run, bytes);
    }

    @Benchmark
    public long plainRead() {
        long x = 0;
        for (long i = 0; i < bytes; i += 8) x ^= run.get(ValueLayout.JAVA_LONG_UNALIGNED, i);
        return x;
    }
}
