package k3j.io;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.TimeUnit;
import k3j.testkit.ReleasedLayout;
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
 * Indexing the released K3 layout: 96 sparse shards whose headers hold 497,052 tensors plus the
 * model.safetensors.index.json, written once per fork. One call = {@code CheckpointIndex.open(dir)}
 * (read and validate every header and the index). Budget: under 2 s on a 2-core machine.
 *
 * <p>{@code pageCache=cold} drops the files' pages before every call (fsync + posix_fadvise DONTNEED
 * on these files only). Cold JVM: {@code -wi 0 -i 1 -f 3}; warm JVM: the defaults. See ci/bench-index.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 5)
@Measurement(iterations = 10)
@Fork(value = 1, jvmArgsAppend = {"-XX:+UseParallelGC", "--enable-native-access=ALL-UNNAMED"})
public class CheckpointIndexBench {
    private static final int POSIX_FADV_DONTNEED = 4;

    @Param({"warm"})
    public String pageCache;

    private ReleasedLayout.Written layout;
    private Path tmp;

    @Setup(Level.Trial)
    public void writeLayout() throws IOException {
        tmp = Files.createTempDirectory("k3j-index-bench");
        layout = ReleasedLayout.released().write(tmp.resolve("k3"));
        if (layout.tensors() != 497_052) throw new IllegalStateException("layout has " + layout.tensors() + " tensors");
    }

    @Setup(Level.Iteration)
    public void dropPages() throws Throwable {
        if (!pageCache.equals("cold")) return;
        for (Path p : layout.shards()) evict(p);
        evict(layout.dir().resolve(CheckpointIndex.INDEX_FILE));
    }

    @Benchmark
    public CheckpointIndex open() {
        return CheckpointIndex.open(layout.dir());
    }

    @TearDown(Level.Trial)
    public void deleteLayout() throws IOException {
        ReleasedLayout.delete(layout);
        Files.deleteIfExists(tmp);
    }

    /** Writes back and drops the page cache of one file (other files are untouched). */
    private static void evict(Path file) throws Throwable {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
            ch.force(true);
        }
        Linker linker = Linker.nativeLinker();
        MethodHandle open = linker.downcallHandle(linker.defaultLookup().find("open").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT));
        MethodHandle fadvise = linker.downcallHandle(linker.defaultLookup().find("posix_fadvise").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
        MethodHandle close = linker.downcallHandle(linker.defaultLookup().find("close").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) open.invokeExact(arena.allocateFrom(file.toString()), 0);
            if (fd < 0) throw new IOException("open " + file + " failed");
            int rc = (int) fadvise.invokeExact(fd, 0L, 0L, POSIX_FADV_DONTNEED);
            int ignored = (int) close.invokeExact(fd);
            if (rc != 0) throw new IOException("posix_fadvise " + file + " failed: " + rc);
        }
    }
}
