package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import k3j.bisect.BisectException;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.io.CheckpointException;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 corrupt MODEL OUT --corruption SPEC...}: writes a corrupted copy of a model directory (untouched
 * files hard-linked, touched shards copied and patched; headers unchanged) for proving that per-layer
 * conformance and {@code k3 bisect} catch the corruption.
 */
@Command(name = "corrupt", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Write a corrupted copy of a model directory (data only, headers unchanged).",
        footer = {"SPEC: " + "swap:L:A,B | nibbles:L:EXPERT | fill:L:TENSOR:FROM:VALUE | scale:L:TENSOR:FACTOR | transpose:L:TENSOR",
                "      | byte:L:EXPERT:PART:INDEX:MASK (PART w1_packed .. w3_scale; the byte XOR MASK, 1..255 as 16 or 0x10) | row:L:EXPERT:w1|w2|w3:ROW (row ROW holds row ROW+1's packed bytes)",
                "  tensors by suffix after language_model.model.layers.<L>., e.g. swap:5:self_attn.q_proj.weight,self_attn.k_proj.weight",
                "Exit codes: 0 written, 1 cannot read or write, 2 bad arguments."})
final class CorruptCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @Parameters(index = "1", paramLabel = "OUT", description = "the directory to write (must not exist or be empty)")
    Path out;

    @Option(names = "--corruption", required = true, paramLabel = "SPEC", description = "a corruption (repeatable; applied in order)")
    List<String> specs;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter o = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        Path model = modelFolder.folder();
        try {
            k3j.io.Outputs.checkFolder(out, "OUT");
        } catch (IOException e) {
            throw usage(e.getMessage());
        }
        if (Files.exists(out) && !empty(out)) throw usage(out + ": exists and is not an empty folder");
        List<Corruption> cs;
        try {
            cs = specs.stream().map(Corruptions::parse).toList();
        } catch (BisectException e) {
            throw usage(e.getMessage());
        }
        try {
            Corruptions.write(model, out, cs);
        } catch (BisectException | CheckpointException e) {
            err.println("k3 corrupt: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
        for (Corruption c : cs) o.println("wrote " + out + ": " + c.spec());
        return ExitCode.OK;
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    private static boolean empty(Path dir) {
        if (!Files.isDirectory(dir)) return false;
        try (Stream<Path> s = Files.list(dir)) {
            return s.findAny().isEmpty();
        } catch (IOException e) {
            return false;
        }
    }
}
