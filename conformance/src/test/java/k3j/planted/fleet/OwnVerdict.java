package k3j.planted.fleet;

import k3j.planted.verdict.Verdict;

/** Breaks "only the verdict constructs outcomes": a summary making its own verdict beside the decision. */
public final class OwnVerdict {
    private OwnVerdict() {}

    public static Verdict summary(int failedLayers) {
        return new Verdict(failedLayers == 0 ? "CONFORMS" : "DOES_NOT_CONFORM");
    }
}
