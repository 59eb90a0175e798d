package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
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
        version = K3.VERSION,
        description = "Kimi K3 inference in Java.")
public final class K3 implements Runnable {
    /** What {@code --version} prints, on the root command and on every subcommand. */
    public static final String VERSION = "k3 (k3j) 0.1.0";

    /**
     * The subcommands by name, in --help order. Picocli builds a command's model by reflection when it is added,
     * and the whole tree cost more CPU at start-up than a short run's arithmetic; {@link #execute} therefore
     * adds only the subcommand a line names (none for {@code --version}), and the whole tree only where the
     * line needs it (--help, an unknown option, a suggestion).
     */
    static final Map<String, Class<?>> SUBCOMMANDS = subcommands(RunCommand.class, InspectCommand.class, SimCacheCommand.class,
            PackTrunkCommand.class, DigestCommand.class, DoctorCommand.class, ConformCommand.class, CompareLogitsCommand.class, BisectCommand.class,
            CorruptCommand.class, TokenizeCommand.class, ServeCommand.class, ProbeCommand.class);

    private static Map<String, Class<?>> subcommands(Class<?>... classes) {
        Map<String, Class<?>> byName = new LinkedHashMap<>();
        for (Class<?> c : classes) byName.put(c.getAnnotation(Command.class).name(), c);
        return Collections.unmodifiableMap(byName);
    }

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
        return commandLine(intercepts, SUBCOMMANDS.keySet());
    }

    /** The subcommands a line needs: the one it names, none for a lone --version, all where usage or a suggestion may list them. */
    static Set<String> needed(String... args) {
        if (args.length > 0 && SUBCOMMANDS.containsKey(args[0])) return Set.of(args[0]);
        if (args.length == 1 && (args[0].equals("--version") || args[0].equals("-V"))) return Set.of();
        return SUBCOMMANDS.keySet();
    }

    /** The command line with only the {@code names} subcommands (a model built is a model paid for at start-up). */
    static CommandLine commandLine(Assembly.Intercepts intercepts, Set<String> names) {
        CommandLine.IFactory defaults = CommandLine.defaultFactory();
        CommandLine cl = new CommandLine(new K3(), new CommandLine.IFactory() {
            @Override
            @SuppressWarnings("unchecked")
            public <K> K create(Class<K> cls) throws Exception {
                return cls == RunCommand.class ? (K) new RunCommand(intercepts) : defaults.create(cls);
            }
        });
        for (var e : SUBCOMMANDS.entrySet()) {
            if (names.contains(e.getKey())) cl.addSubcommand(e.getKey(), e.getValue());
        }
        // no @FILE argument files: "@/" would be opened and read as more arguments, failing outside the usage errors,
        // and a model folder or a prompt may start with '@'
        cl.setExpandAtFiles(false);
        cl.setParameterExceptionHandler((ex, args) -> {
            CommandLine c = ex.getCommandLine();
            String msg = ex instanceof CommandLine.UnmatchedArgumentException u ? unknownOptions(u, c) : null;
            c.getErr().println("k3: " + (msg != null ? msg : ex.getMessage().strip().replaceFirst("^Error: ", "")));   // an argument group's message starts with "Error: "
            c.getErr().println("Try '" + c.getCommandSpec().qualifiedName() + " --help' for more information.");
            return ExitCode.USAGE;
        });
        cl.setExecutionExceptionHandler((ex, c, parseResult) -> {
            // in words, never a class name; the API's refusal in the command's words (its flags, not the API's options)
            c.getErr().println("k3: " + k3j.io.SafeFiles.why(ex instanceof k3j.api.CannotJudge && ex.getCause() instanceof Exception cause ? cause : ex));
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
            if (args.length > 0 && !args[0].startsWith("-") && !SUBCOMMANDS.containsKey(args[0])) {
                if (looksLikeCommand(args[0])) {
                    err.println("k3: unknown command '" + args[0] + "'" + didYouMean(args[0]) + " (and no model folder of that name)");
                    err.println("Try 'k3 --help' for the commands.");
                    return ExitCode.USAGE;
                }
                args = prepend("run", args);
            }
            CommandLine cl = commandLine(intercepts, needed(args));
            cl.setOut(out);
            cl.setErr(err);
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
        String[] a = args.length > 0 && !args[0].startsWith("-") && !SUBCOMMANDS.containsKey(args[0]) ? prepend("run", args) : args;
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

    /**
     * "Unknown option '--layer'; did you mean '--layers'?" for a line with unknown options, or null when nothing unmatched
     * looks like an option (picocli's own message then). A word right after an unknown option is taken as its value, not
     * listed as a second unknown argument; any other stray word is named as unexpected.
     */
    static String unknownOptions(CommandLine.UnmatchedArgumentException u, CommandLine c) {
        java.util.List<String> options = new java.util.ArrayList<>(), stray = new java.util.ArrayList<>();
        boolean afterOption = false;
        for (String a : u.getUnmatched()) {
            if (a.startsWith("-") && a.length() > 1 && !a.matches("-[0-9.].*")) {
                options.add(a.contains("=") ? a.substring(0, a.indexOf('=')) : a);
                afterOption = !a.contains("=");
            } else if (afterOption) {
                afterOption = false;
            } else {
                stray.add(a);
            }
        }
        if (options.isEmpty()) return null;
        java.util.Set<String> names = new java.util.TreeSet<>();
        c.getCommandSpec().options().forEach(o -> names.addAll(Arrays.asList(o.names())));
        StringBuilder m = new StringBuilder();
        for (String o : options) {
            if (!m.isEmpty()) m.append("; ");
            String alias = ALIASES.get(o);
            m.append("Unknown option '").append(o).append("'").append(alias != null && names.contains(alias) ? "; did you mean '" + alias + "'?"
                    : closest(o, names.stream().filter(n -> n.startsWith("--")).toList()));
        }
        if (!stray.isEmpty()) m.append("; unexpected argument(s) ").append(String.join(", ", stray.stream().map(a -> "'" + a + "'").toList()));
        return m.toString();
    }

    /**
     * Other engines' and tools' names for k3's options, suggested before the nearest spelling (which for "--temp"
     * is "--help", two edits away, and for "--max-tokens" nothing).
     */
    static final Map<String, String> ALIASES = Map.ofEntries(Map.entry("--temp", "--temperature"), Map.entry("--tokens", "--gen"),
            Map.entry("--max-tokens", "--gen"), Map.entry("--max-new-tokens", "--gen"), Map.entry("--n-predict", "--gen"),
            Map.entry("--tokenizer", "--tok"), Map.entry("--ref", "--reference"), Map.entry("--top_p", "--top-p"), Map.entry("--top_k", "--top-k"));

    private static String didYouMean(String word) {
        return closest(word, SUBCOMMANDS.keySet());
    }

    /** "; did you mean 'X'?" for the nearest of {@code names} within a few edits of {@code word}, else "". */
    private static String closest(String word, java.util.Collection<String> names) {
        return names.stream()
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
