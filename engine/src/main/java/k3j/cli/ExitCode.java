package k3j.cli;

/**
 * The k3 command's exit codes (docs/semantics.md §7.9). A command that judges exits by its verdict alone
 * ({@link k3j.verdict.Verdict#exitCode()}: 0 green, 1 failed, 2 refused, 3 INCOMPLETE); these are the codes of
 * everything else. They are assigned in a static block, not as constants, so every read stays in the class files and
 * the architecture rule "exit codes come only from the verdict" (ArchitectureGate) sees a judging class reading one.
 */
public final class ExitCode {
    /** Success; also --help, --version, --list-presets and --tf-check. */
    public static final int OK;
    /** Runtime failure: unreadable or partial checkpoint, memory plan refused, bind or forward failure. */
    public static final int RUNTIME;
    /** Usage or request validation: bad flags, config refusal, out-of-vocab id, KV-cache refusal. */
    public static final int USAGE;
    /** INCOMPLETE: something planned was not judged (a verdict's own code; named here for the table of codes). */
    public static final int INCOMPLETE;
    /** Run invalid: one or more routed experts failed to load, so the tokens are corrupt. */
    public static final int RUN_INVALID;
    /** Stopped by SIGINT (Ctrl-C) during generation: the tokens generated so far were printed and written (128 + 2). */
    public static final int INTERRUPTED;
    /** Stopped by SIGTERM during generation: the tokens generated so far were printed and written (128 + 15). */
    public static final int TERMINATED;

    static {
        OK = 0;
        RUNTIME = 1;
        USAGE = 2;
        INCOMPLETE = 3;
        RUN_INVALID = 4;
        INTERRUPTED = 130;
        TERMINATED = 143;
    }

    private ExitCode() {}
}
