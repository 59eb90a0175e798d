package k3j.planted.verdict;

import k3j.planted.dump.Dump;

/** Breaks "the decision below the evidence": the verdict reads a dump instead of the items it is given. */
public final class Peeks {
    private Peeks() {}

    public static Verdict layer(int i) {
        return Invariants.decide(Dump.stage(i).length == 1);
    }
}
