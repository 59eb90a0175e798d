package k3j.verdict;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one decision every verdict goes through, and the invariants it enforces (docs/semantics.md §10.11, numbered
 * there as here). Entry points gather {@link Item}s — what they judged and how it came out — and {@link #decide}
 * turns them into a {@link Verdict}; the checks below run before anything is graded, in the same order for every
 * entry point (conform, conform --lossy, compare-logits, the API, the gates). Each kind of evidence gives its own items
 * ({@code LayerReport.item}, {@code LogitParity.item}, {@code LossyLayers.items}, {@code ProviderGrade.item}, ...);
 * invariants 2 and 3 are {@code CandidateDump.requireFits}. This package knows nothing of dumps or comparisons: they
 * depend on it, never the reverse.
 */
public final class Invariants {
    private Invariants() {}

    /** How one judged item came out. */
    public enum Status { PASS, FAIL, NOT_JUDGED, REFUSED }

    /** float32 (the rounding budget) or lossy (graded by thresholds). */
    public enum Mode { FLOAT32, LOSSY }

    /** One thing a verdict covers: what it is, how it came out, and why when not PASS. */
    public record Item(String what, Status status, String why) {
        public static Item pass(String what) {
            return new Item(what, Status.PASS, "");
        }

        public static Item fail(String what, String why) {
            return new Item(what, Status.FAIL, why);
        }

        public static Item notJudged(String what, String why) {
            return new Item(what, Status.NOT_JUDGED, why);
        }

        public static Item refused(String what, String why) {
            return new Item(what, Status.REFUSED, why);
        }

        String line() {
            return why.isEmpty() ? what : what + ": " + why;
        }
    }

    /**
     * The decision. REFUSED when any item broke an invariant; else INCOMPLETE when anything planned was not judged
     * or nothing was judged at all; else DOES NOT CONFORM / OUTSIDE when any item failed; else CONFORMS / WITHIN.
     */
    public static Verdict decide(Mode mode, List<Item> items) {
        List<String> findings = new ArrayList<>(), judged = new ArrayList<>(), notJudged = new ArrayList<>();
        boolean refused = false, failed = false;
        String first = null, category = null;
        for (Item i : items) {
            switch (i.status()) {
                case PASS -> judged.add(i.what());
                case FAIL -> {
                    judged.add(i.what());
                    findings.add(i.line());
                    failed = true;
                }
                case NOT_JUDGED -> notJudged.add(i.line());
                case REFUSED -> {
                    findings.add(i.line());
                    refused = true;
                }
            }
            if (i.status() == Status.FAIL || i.status() == Status.REFUSED) {
                if (first == null) first = i.what();
                if (category == null) category = Verdict.category(i.why());
            }
        }
        if (judged.isEmpty() && notJudged.isEmpty() && !refused) notJudged.add("nothing: no item was judged");
        Verdict.Outcome o = refused ? Verdict.Outcome.REFUSED
                : !notJudged.isEmpty() ? Verdict.Outcome.INCOMPLETE
                : failed ? (mode == Mode.LOSSY ? Verdict.Outcome.OUTSIDE : Verdict.Outcome.DOES_NOT_CONFORM)
                : mode == Mode.LOSSY ? Verdict.Outcome.WITHIN : Verdict.Outcome.CONFORMS;
        return new Verdict(o, findings, judged, notJudged, first, o.green() ? null : category, null, null);
    }

    /**
     * Invariant 1: every value entering a verdict is finite and within {@code magnitude_multiple} · max|reference| of
     * its array ({@link VerdictLimits}); anything else is refused, never graded (a saturated 3.4e38 row would give
     * KL 0 through log-softmax cancellation). Returns the refusal's reason, or null.
     */
    public static String implausible(String what, float[] candidate, float[] reference, VerdictLimits limits) {
        double refMax = 0;
        for (float r : reference) {
            if (!Float.isFinite(r)) return what + ": the reference holds " + r;
            refMax = Math.max(refMax, Math.abs(r));
        }
        double bound = limits.magnitudeMultiple() * refMax;
        for (int j = 0; j < candidate.length; j++) {
            float x = candidate[j];
            if (!Float.isFinite(x)) return what + ": value " + j + " is " + x + " (non-finite)";
            if (Math.abs(x) > bound) {
                return String.format(Locale.ROOT, "%s: value %d is %.4g, beyond %.4g x max|reference| = %.4g (implausible magnitude)", what, j, x,
                        limits.magnitudeMultiple(), refMax, bound);
            }
        }
        return null;
    }

    /**
     * A whole verdict as one item of a larger one ({@code --against}: each candidate's verdict against the reference):
     * green is a pass, REFUSED a refusal, INCOMPLETE not judged, anything else a failure; the why is its VERDICT line
     * and first finding.
     */
    public static Item of(String what, Verdict v) {
        String why = v.line().substring("VERDICT: ".length()) + (v.findings().isEmpty() ? v.notJudged().isEmpty() ? "" : "; not judged: " + v.notJudged().getFirst()
                : "; " + v.findings().getFirst());
        return switch (v.outcome()) {
            case CONFORMS, WITHIN -> Item.pass(what);
            case REFUSED -> Item.refused(what, why);
            case INCOMPLETE -> Item.notJudged(what, why);
            case DOES_NOT_CONFORM, OUTSIDE -> Item.fail(what, why);
        };
    }
}
