package k3j.planted.cli;

/** The planted front door's exit codes (assigned in a static block, as the engine's are, so their reads are visible). */
public final class ExitCode {
    public static final int OK;
    public static final int RUNTIME;
    public static final int INCOMPLETE;

    static {
        OK = 0;
        RUNTIME = 1;
        INCOMPLETE = 3;
    }

    private ExitCode() {}
}
