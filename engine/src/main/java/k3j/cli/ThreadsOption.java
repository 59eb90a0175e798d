package k3j.cli;

import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code --threads N}, shared by the subcommands that run the forward. */
final class ThreadsOption {
    @Option(names = "--threads", paramLabel = "N", description = "worker threads (default: available processors)")
    Integer threads;

    @Spec(Spec.Target.MIXEE)
    CommandSpec mixee;

    /** The requested count, or every processor available to the JVM when --threads was not given. */
    int count() {
        if (threads != null && threads < 1) throw new CommandLine.ParameterException(mixee.commandLine(), "--threads must be >= 1, got " + threads);
        return threads != null ? threads : Runtime.getRuntime().availableProcessors();
    }
}
