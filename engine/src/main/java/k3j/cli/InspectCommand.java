package k3j.cli;

import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/** {@code k3 inspect PATH}: placeholder until the safetensors reader lands. */
@Command(name = "inspect", description = "Summarise a model directory, one .safetensors file or a config.json.")
final class InspectCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "PATH")
    Path path;

    @Override
    public Integer call() {
        System.err.println("k3 inspect: not built yet");
        return ExitCode.RUNTIME;
    }
}
