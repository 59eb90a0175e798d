package k3j.planted.verdict;

/** The planted tree's one decision (legal: the verdict constructs its own value). */
public final class Invariants {
    private Invariants() {}

    public static Verdict decide(boolean green) {
        return new Verdict(green ? "CONFORMS" : "DOES_NOT_CONFORM");
    }
}
