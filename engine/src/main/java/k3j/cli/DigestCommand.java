package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.fleet.TensorDigests;
import k3j.io.CheckpointIndex;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 digest MODEL --out FILE}: the model's per-tensor digest manifest (docs/formats.md §18.5), every byte of
 * every tensor hashed once; {@code conform --merge ROOT --digests FILE} requires every shard's tensors to be these.
 */
@Command(name = "digest", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Write the model's per-tensor sha256 manifest (every byte of every tensor), for conform --merge --digests.",
        footer = "Exit codes: 0 written, 1 a shard cannot be read, 2 bad arguments.")
final class DigestCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @Option(names = "--out", required = true, paramLabel = "FILE", description = "where to write the manifest (JSON)")
    Path out;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        PrintWriter o = spec.commandLine().getOut();
        Path model = modelFolder.folder();
        try {
            new k3j.io.Outputs().input(model, "a file of the model folder").file(out, "--out");
        } catch (IOException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        CheckpointIndex index = CheckpointIndex.open(model);
        long bytes = index.tensors().stream().mapToLong(k3j.io.TensorInfo::length).sum();
        long cpu0 = cpuNanos(), t0 = System.nanoTime();
        TensorDigests d = TensorDigests.of(index.tensors(), name -> true);
        double cpu = (cpuNanos() - cpu0) / 1e9, wall = (System.nanoTime() - t0) / 1e9;
        d.write(out, "--out");
        o.printf(Locale.ROOT, "digests   : %d tensors, %d bytes hashed in %.2f s (%.2f CPU s, %.0f MB/CPU s)%n", d.sha256().size(), bytes, wall, cpu,
                cpu > 0 ? bytes / 1e6 / cpu : 0);
        o.println("written   : " + out);
        return ExitCode.OK;
    }

    private static long cpuNanos() {
        return java.lang.management.ManagementFactory.getThreadMXBean().getCurrentThreadCpuTime();
    }
}
