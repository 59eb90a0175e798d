package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import java.util.List;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;

/**
 * A gate's case judged by the one decision (docs/semantics.md §10.11) instead of a threshold of the gate's own: each
 * figure is an item (its ratio to the tolerance its fixture manifest gives, banded by {@link Finding#ofRatio}, or an
 * exact check that held or not), {@link Invariants#decide} decides the case, and the case asserts that outcome.
 */
public final class CaseVerdict {
    private CaseVerdict() {}

    /** A worst ratio to the manifest's tolerance as an item: a pass within it, else a failure tagged with its band. */
    public static Invariants.Item ratio(String what, double ratioToTolerance) {
        Finding f = Finding.ofRatio(ratioToTolerance);
        return f == Finding.CONFORMS ? Invariants.Item.pass(what) : Invariants.Item.fail(what, f.tag() + " " + Evidence.format(ratioToTolerance) + "x tolerance");
    }

    /** An exact check as an item: a pass when it held, else a failure saying why. */
    public static Invariants.Item exact(String what, boolean held, String why) {
        return held ? Invariants.Item.pass(what) : Invariants.Item.fail(what, why);
    }

    /** The decision over {@code items}, attached as evidence; the case fails unless it CONFORMS, with the decision's own findings. */
    public static Verdict assertConforms(String what, List<Invariants.Item> items) {
        Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, items);
        Evidence.json("verdict", v.json());
        if (v.outcome() != Verdict.Outcome.CONFORMS) {
            fail(what + ": " + v.line() + (v.findings().isEmpty() ? "" : "\n" + String.join("\n", v.findings()))
                    + (v.notJudged().isEmpty() ? "" : "\nnot judged: " + String.join("; ", v.notJudged())));
        }
        return v;
    }
}
