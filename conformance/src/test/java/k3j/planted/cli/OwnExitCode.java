package k3j.planted.cli;

import k3j.planted.api.Door;
import k3j.planted.verdict.Verdict;

/** Breaks "exit codes come only from the verdict": a judging command picks exit 0 from its own test of the layers. */
public final class OwnExitCode {
    private OwnExitCode() {}

    public static int call(int failedLayers) {
        Verdict v = new Door().judge(failedLayers == 0);
        return failedLayers == 0 ? ExitCode.OK : v.exitCode();
    }
}
