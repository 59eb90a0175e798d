package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;
import k3j.model.Assembly;
import k3j.plan.Preset;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * The k3 command: {@code k3 <subcommand> ...}, or {@code k3 <model_dir> ...} for {@code run}. Bad usage is one
 * line and a pointer to --help, exit 2; never a stack trace, never the whole usage.
 */
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
        throw new CommandLine.ParameterException(spec.commandLine(), "a subcommand or a model folder is required");
    }

    /** The command line with nothing interposed. */
    public static CommandLine commandLine() {
        return commandLine(Assembly.Intercepts.NONE);
    }

    /** The command line whose run interposes {@code intercepts} on its expert and trunk reads. */
    public static CommandLine commandLine(Assembly.Intercepts intercepts) {
        CommandLine.IFactory defaults = CommandLine.defaultFactory();
        CommandLine cl = new CommandLine(new K3(), new CommandLine.IFactory() {
            @Override
            @SuppressWarnings("unchecked")
            public <K> K create(Class<K> cls) throws Exception {
                return cls == RunCommand.class ? (K) new RunCommand(intercepts) : defaults.create(cls);
            }
        });
        cl.setParameterExceptionHandler((ex, args) -> {
            CommandLine c = ex.getCommandLine();
            c.getErr().println("k3: " + ex.getMessage().strip().replaceFirst("^Error: ", ""));   // an argument group's message starts with "Error: "
            c.getErr().println("Try '" + c.getCommandSpec().qualifiedName() + " --help' for more information.");
            return ExitCode.USAGE;
        });
        cl.setExecutionExceptionHandler((ex, c, parseResult) -> {
            c.getErr().println("k3: " + k3j.io.SafeFiles.why(ex));   // in words, never a class name
            return ExitCode.RUNTIME;
        });
        return cl;
    }

    public static void main(String[] args) {
        System.exit(execute(args));
    }

    /** {@link #execute(PrintWriter, PrintWriter, Assembly.Intercepts, String...)} on the standard streams. */
    public static int execute(String... args) {
        return execute(new PrintWriter(System.out, true), new PrintWriter(System.err, true), Assembly.Intercepts.NONE, args);
    }

    /**
     * Runs one k3 command line (docs/semantics.md §7.1). {@code --list-presets} anywhere prints the preset table
     * (no model needed). A first argument that is neither an option nor a subcommand is the model folder of
     * {@code run}, unless it names no file and reads like a mistyped command: then "unknown command", exit 2.
     */
    public static int execute(PrintWriter out, PrintWriter err, Assembly.Intercepts intercepts, String... args) {
        try {
            if (Arrays.asList(args).contains(ListPresetsOption.NAME)) {
                out.print(Preset.table());
                return ExitCode.OK;
            }
            CommandLine cl = commandLine(intercepts);
            cl.setOut(out);
            cl.setErr(err);
            if (args.length > 0 && !args[0].startsWith("-") && !cl.getSubcommands().containsKey(args[0])) {
                if (looksLikeCommand(args[0])) {
                    err.println("k3: unknown command '" + args[0] + "'" + didYouMean(args[0], cl) + " (and no model folder of that name)");
                    err.println("Try 'k3 --help' for the commands.");
                    return ExitCode.USAGE;
                }
                String[] run = new String[args.length + 1];
                run[0] = "run";
                System.arraycopy(args, 0, run, 1, args.length);
                args = run;
            }
            return cl.execute(args);
        } finally {
            out.flush();
            err.flush();
        }
    }

    /**
     * Parses a command line and, for a run, checks the flags that need no model ({@link RunCommand#checkFlags});
     * nothing runs and nothing is written. A bad line throws {@link CommandLine.ParameterException}: the clean
     * refusal the CLI fuzz target accepts.
     */
    public static void checkArguments(String... args) {
        CommandLine cl = commandLine();
        String[] a = args.length > 0 && !args[0].startsWith("-") && !cl.getSubcommands().containsKey(args[0]) ? prepend("run", args) : args;
        CommandLine.ParseResult r = cl.parseArgs(a);
        if (r.subcommand() != null && r.subcommand().commandSpec().userObject() instanceof RunCommand run
                && !r.subcommand().isUsageHelpRequested() && !r.subcommand().isVersionHelpRequested()) {
            run.checkFlags();
        }
    }

    private static String[] prepend(String first, String[] rest) {
        String[] all = new String[rest.length + 1];
        all[0] = first;
        System.arraycopy(rest, 0, all, 1, rest.length);
        return all;
    }

    /** A bare word (no path separator, no dot) naming nothing on disk. */
    private static boolean looksLikeCommand(String arg) {
        if (arg.isEmpty() || arg.contains("/") || arg.contains(".") || arg.contains(java.io.File.separator)) return false;
        try {
            return !Files.exists(Path.of(arg));
        } catch (InvalidPathException e) {
            return true;
        }
    }

    private static String didYouMean(String word, CommandLine cl) {
        return cl.getSubcommands().keySet().stream()
                .map(name -> new Object() { final String n = name; final int d = distance(word, name); })
                .filter(c -> c.d <= Math.max(2, word.length() / 3))
                .min(Comparator.comparingInt(c -> c.d))
                .map(c -> "; did you mean '" + c.n + "'?")
                .orElse("");
    }

    /** Levenshtein distance. */
    static int distance(String a, String b) {
        int[] prev = new int[b.length() + 1], cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) prev[j] = j;
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                cur[j] = Math.min(Math.min(cur[j - 1], prev[j]) + 1, prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1));
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }
}
