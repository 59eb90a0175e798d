package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.io.CheckpointSummary;
import k3j.io.CheckpointSummary.TensorClass;
import k3j.io.CheckpointSummary.Tally;
import k3j.io.DType;
import k3j.plan.Human;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 inspect PATH}: validates every safetensors header of a model directory (or one file) and
 * summarises it. Exit 0 on a valid checkpoint; 1 ({@link ExitCode#RUNTIME}) when it is unreadable,
 * malformed or partial, printing {@code k3 inspect: FILE: ... [rule]}; 2 ({@link ExitCode#USAGE}) when
 * PATH does not exist or is neither a directory, a .safetensors file nor a config (.json).
 */
@Command(name = "inspect", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Validate and summarise a model directory, one .safetensors file or a config (.json).",
        footer = "Exit codes: 0 valid, 1 unreadable/invalid/partial checkpoint, 2 bad arguments.")
final class InspectCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "PATH", description = "a model directory, a .safetensors file or a config (.json)")
    Path path;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (!Files.exists(path)) throw new CommandLine.ParameterException(spec.commandLine(), "no such file or folder: " + path);
        String fileName = path.getFileName() == null ? "" : path.getFileName().toString();
        if (fileName.endsWith(".json") && !Files.isDirectory(path)) {
            try {
                out.println(ConfigReader.read(path).summary());
                return ExitCode.OK;
            } catch (ConfigException e) {
                err.println("k3 inspect: " + e.getMessage());
                return ExitCode.USAGE;
            }
        }
        if (!Files.isDirectory(path) && !fileName.endsWith(".safetensors")) {
            throw new CommandLine.ParameterException(spec.commandLine(), path + ": not a model directory, a .safetensors file or a config (.json)");
        }
        try {
            CheckpointIndex index = CheckpointIndex.open(path);
            print(out, index, CheckpointSummary.of(index));
        } catch (CheckpointException e) {
            err.println("k3 inspect: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
        return ExitCode.OK;
    }

    /** The config's one-line summary, "absent", or the reader's refusal (a FIFO or device named config.json is refused, not "absent"). */
    private static String configLine(Path config) {
        if (!Files.exists(config)) return "absent";
        try {
            return ConfigReader.read(config).summary();
        } catch (ConfigException e) {
            return "REFUSED: " + e.getMessage();
        }
    }

    private void print(PrintWriter out, CheckpointIndex index, CheckpointSummary s) {
        out.println("checkpoint: " + path + (index.indexFile().isPresent()
                ? " (index " + index.indexFile().get().getFileName() + ")" : ""));
        if (Files.isDirectory(path)) {
            out.println("config.json: " + configLine(path.resolve("config.json")));
        }
        out.printf(Locale.ROOT, "shards: %d files, %d bytes (%s)%n", s.shards(), s.shardBytes(), Human.bytes(s.shardBytes()));
        out.printf(Locale.ROOT, "tensors: %d%n", s.tensors());
        out.printf(Locale.ROOT, "data: %d bytes (%s)%n", s.dataBytes(), Human.bytes(s.dataBytes()));
        out.println("dtypes:");
        for (Map.Entry<DType, Tally> e : s.dtypes().entrySet()) {
            out.printf(Locale.ROOT, "  %-8s %9d tensors %16d bytes%n", e.getKey(), e.getValue().count(), e.getValue().bytes());
        }
        int layers = s.attention().length();
        out.printf(Locale.ROOT, "layers: %d%n", layers);
        if (layers > 0) {
            out.printf(Locale.ROOT, "  attention: %s (%d KDA, %d MLA)%n", s.attention(),
                    CheckpointSummary.count(s.attention(), 'K'), CheckpointSummary.count(s.attention(), 'M'));
            out.printf(Locale.ROOT, "  mlp:       %s (%d dense, %d MoE)%n", s.mlp(),
                    CheckpointSummary.count(s.mlp(), 'D'), CheckpointSummary.count(s.mlp(), 'E'));
        }
        out.printf(Locale.ROOT, "routed experts: %d%n", s.routedExperts());
        out.println("tensor classes:");
        for (Map.Entry<TensorClass, Tally> e : s.classes().entrySet()) {
            out.printf(Locale.ROOT, "  %-14s %9d tensors %16d bytes%n", e.getKey().label(), e.getValue().count(), e.getValue().bytes());
        }
        for (CheckpointSummary.Trailing t : s.trailing()) {
            out.printf(Locale.ROOT, "note: %s: %d trailing bytes after the last tensor%n", t.file(), t.bytes());
        }
    }
}
