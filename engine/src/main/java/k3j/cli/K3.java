package k3j.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The k3 command: {@code k3 <subcommand> ...}. Bad usage is one line plus usage and exit 2, never a stack trace. */
@Command(name = "k3",
        mixinStandardHelpOptions = true,
        version = "k3 (k3j) 0.1.0",
        description = "Kimi K3 inference in Java.",
        subcommands = {RunCommand.class, InspectCommand.class, SimCacheCommand.class, PackTrunkCommand.class, DoctorCommand.class,
                ConformCommand.class, CompareLogitsCommand.class, BisectCommand.class, CorruptCommand.class, TokenizeCommand.class})
public final class K3 implements Runnable {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public void run() {
        throw new CommandLine.ParameterException(spec.commandLine(), "a subcommand is required");
    }

    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new K3());
        cl.setParameterExceptionHandler((ex, args) -> {
            CommandLine c = ex.getCommandLine();
            c.getErr().println("k3: " + ex.getMessage());
            c.usage(c.getErr());
            return ExitCode.USAGE;
        });
        cl.setExecutionExceptionHandler((ex, c, parseResult) -> {
            c.getErr().println("k3: " + ex.getMessage());
            return ExitCode.RUNTIME;
        });
        return cl;
    }

    public static void main(String[] args) {
        System.exit(execute(args));
    }

    /**
     * {@code k3 <model_dir> [options]} is the run command (docs/semantics.md §7.1): a first argument that is neither an
     * option nor a subcommand name is taken as the model directory.
     */
    public static int execute(String... args) {
        CommandLine cl = commandLine();
        if (java.util.Arrays.asList(args).contains("--list-presets")) {   // docs/semantics.md §7.1: anywhere on the line, no model needed
            System.out.print(k3j.plan.Preset.table());
            System.out.flush();
            return ExitCode.OK;
        }
        return cl.execute(normalize(cl, args));
    }

    private static String[] normalize(CommandLine cl, String[] args) {
        if (args.length > 0 && !args[0].startsWith("-") && !cl.getSubcommands().containsKey(args[0])) {
            String[] run = new String[args.length + 1];
            run[0] = "run";
            System.arraycopy(args, 0, run, 1, args.length);
            return run;
        }
        return args;
    }

    /**
     * Parses a command line and, for a run, checks its flags as {@link #execute} would before touching a model;
     * nothing is executed, read (beyond the output folders' existence) or written. A bad line throws
     * {@link CommandLine.ParameterException}: the clean refusal the CLI fuzz target accepts.
     */
    public static void checkArguments(String... args) {
        CommandLine cl = commandLine();
        CommandLine.ParseResult r = cl.parseArgs(normalize(cl, args));
        if (r.subcommand() != null && r.subcommand().commandSpec().userObject() instanceof RunCommand run && !run.listPresets
                && !r.subcommand().isUsageHelpRequested() && !r.subcommand().isVersionHelpRequested()) {
            run.checkFlags();
        }
    }
}
