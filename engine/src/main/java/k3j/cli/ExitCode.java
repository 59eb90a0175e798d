package k3j.cli;

/** The k3 command's exit codes (docs/semantics.md §7.9). */
public final class ExitCode {
    /** Success; also --help, --version, --list-presets and --tf-check. */
    public static final int OK = 0;
    /** Runtime failure: unreadable or partial checkpoint, memory plan refused, bind or forward failure. */
    public static final int RUNTIME = 1;
    /** Usage or request validation: bad flags, config refusal, out-of-vocab id, KV-cache refusal. */
    public static final int USAGE = 2;
    /** Run invalid: one or more routed experts failed to load, so the tokens are corrupt. */
    public static final int RUN_INVALID = 4;
    /** Stopped by SIGINT (Ctrl-C) during generation: the tokens generated so far were printed and written (128 + 2). */
    public static final int INTERRUPTED = 130;
    /** Stopped by SIGTERM during generation: the tokens generated so far were printed and written (128 + 15). */
    public static final int TERMINATED = 143;

    private ExitCode() {}
}
