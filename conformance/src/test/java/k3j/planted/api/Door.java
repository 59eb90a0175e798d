package k3j.planted.api;

import k3j.planted.verdict.Invariants;
import k3j.planted.verdict.Verdict;

/** The planted API (legal: it uses the packages below it). */
public final class Door {
    public Verdict judge(boolean green) {
        return Invariants.decide(green);
    }
}
