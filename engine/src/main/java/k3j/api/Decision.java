package k3j.api;

import java.util.List;
import k3j.verdict.Verdict;

/**
 * The one decision on everything a conformance judged (docs/semantics.md §10.10–10.13): green only when every
 * planned item was judged and passed.
 *
 * @param outcome   what the items amount to together
 * @param findings  each failing item's finding, one line each
 * @param judged    what the decision covers
 * @param notJudged what was planned and not judged (non-empty makes the outcome at best {@link Outcome#INCOMPLETE})
 * @param text      the verdict block as {@code k3 conform} prints it: the findings, what was not judged, and the VERDICT line
 * @param line      the VERDICT line alone, such as {@code VERDICT: DOES NOT CONFORM [binding error]}
 * @param firstDivergence the first item that failed or was refused, or null
 * @param category  the category of the first finding, such as {@code [wrong constant or formula]}, or null
 * @param exitCode  the exit code {@code k3 conform} gives this decision: 0 green, 1 failed, 2 refused, 3 incomplete
 */
public record Decision(Outcome outcome, List<String> findings, List<String> judged, List<String> notJudged, String text, String line, String firstDivergence,
                       String category, int exitCode) {
    /** The closed set of outcomes: two green ones (float32 and lossy), the two failures, and the two that judged nothing whole. */
    public enum Outcome {
        /** float32: every judged item within its rounding budget. */
        CONFORMS,
        /** lossy: every graded item within its thresholds. */
        WITHIN,
        /** lossy: an item outside its thresholds, a binding signature or a contradiction. */
        OUTSIDE,
        /** float32: an item outside its rounding budget. */
        DOES_NOT_CONFORM,
        /** Something planned was not judged (a missing layer, stage or logits array, an interrupted run). */
        INCOMPLETE,
        /** An input broke an invariant (non-finite, implausible magnitude, other arrays than the reference's): never graded. */
        REFUSED;

        /** {@return whether this outcome is a pass} */
        public boolean green() {
            return Verdict.Outcome.valueOf(name()).green();
        }

        /** {@return the outcome in the words of the VERDICT line, such as {@code DOES NOT CONFORM}} */
        public String words() {
            return Verdict.Outcome.valueOf(name()).words();
        }
    }

    /** Keeps copies of the lists. */
    public Decision {
        findings = List.copyOf(findings);
        judged = List.copyOf(judged);
        notJudged = List.copyOf(notJudged);
    }

    static Decision of(Verdict v) {
        return new Decision(Outcome.valueOf(v.outcome().name()), v.findings(), v.judged(), v.notJudged(), v.text(), v.line(), v.firstDivergence(), v.category(),
                v.exitCode());
    }

    /** {@return whether the decision is a pass: every planned item judged, and every one within its budget or thresholds} */
    public boolean green() {
        return outcome.green();
    }

    /** One line: the outcome, and how many items were judged, failed and left unjudged. */
    @Override
    public String toString() {
        return "Decision[" + outcome.words() + ": " + judged.size() + " judged, " + findings.size() + " finding(s), " + notJudged.size() + " not judged]";
    }
}
