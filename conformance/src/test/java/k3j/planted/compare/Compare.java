package k3j.planted.compare;

import k3j.planted.dump.Dump;
import k3j.planted.verdict.Invariants;
import k3j.planted.verdict.Verdict;

/** The planted comparison (legal: it reads a dump and hands its evidence to the decision below it). */
public final class Compare {
    private Compare() {}

    public static Verdict layer(int i) {
        return Invariants.decide(Dump.stage(i)[0] == i);
    }
}
