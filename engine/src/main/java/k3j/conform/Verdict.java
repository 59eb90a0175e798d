package k3j.conform;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What one run decided, from the one decision ({@link Invariants#decide}): the outcome, the findings behind it,
 * what was judged and what was planned but not judged. Every entry point (conform, conform --lossy, compare-logits in
 * all its forms, the API and the gates) prints {@link #line()} and exits by {@link #exitCode()}; {@link #json()} is the
 * small file a run writes and the report renders.
 *
 * @param findings  one line per thing that is not green (empty when the outcome is green)
 * @param judged    what the verdict covers
 * @param notJudged what was planned and not judged (non-empty makes the outcome at best INCOMPLETE)
 * @param reference who computed the reference it was judged against ({@link ReferenceDump#producer()}), or null
 */
public record Verdict(Outcome outcome, List<String> findings, List<String> judged, List<String> notJudged, String reference) {
    public Verdict {
        findings = List.copyOf(findings);
        judged = List.copyOf(judged);
        notJudged = List.copyOf(notJudged);
    }

    public Verdict(Outcome outcome, List<String> findings, List<String> judged, List<String> notJudged) {
        this(outcome, findings, judged, notJudged, null);
    }

    /** This verdict, naming the reference's producer: its line and JSON then say "reference: k3j VERSION, not torch" for a reference k3j wrote. */
    public Verdict against(ReferenceDump dump) {
        return new Verdict(outcome, findings, judged, notJudged, dump.producer());
    }

    /** The closed set of outcomes: two green ones (float32 and lossy), the two failures, and the two that judged nothing whole. */
    public enum Outcome {
        /** float32: every judged item within its rounding budget. */
        CONFORMS("CONFORMS", true),
        /** lossy: every graded item within its thresholds, no binding signature, no contradiction. */
        WITHIN("WITHIN THE THRESHOLDS", true),
        /** lossy: an item outside its thresholds, a binding signature or a contradiction. */
        OUTSIDE("OUTSIDE THE THRESHOLDS", false),
        /** float32: an item outside its rounding budget. */
        DOES_NOT_CONFORM("DOES NOT CONFORM", false),
        /** something planned was not judged (a missing layer, stage or logits array, an interrupted run). */
        INCOMPLETE("INCOMPLETE", false),
        /** an input broke an invariant (non-finite, implausible magnitude, arrays other than the reference's): never graded. */
        REFUSED("REFUSED", false);

        private final String words;
        private final boolean green;

        Outcome(String words, boolean green) {
            this.words = words;
            this.green = green;
        }

        public String words() {
            return words;
        }

        public boolean green() {
            return green;
        }
    }

    public boolean green() {
        return outcome.green();
    }

    /** 0 green; 1 not; 2 refused (the input broke an invariant: a usage-level refusal, as for a refused file). */
    public int exitCode() {
        return outcome == Outcome.REFUSED ? 2 : outcome.green() ? 0 : 1;
    }

    private static final java.util.regex.Pattern TAG = java.util.regex.Pattern.compile("\\[[a-z0-9 -]+\\]");

    /** "VERDICT: DOES NOT CONFORM [binding error]": the outcome and the first finding's category tag, when it has one (the findings are listed above it). */
    public String line() {
        java.util.regex.Matcher m = findings.isEmpty() ? null : TAG.matcher(findings.getFirst());
        return "VERDICT: " + outcome.words() + (m != null && m.find() ? " " + m.group() : "")
                + (reference != null && !reference.startsWith("reference: torch") ? " (" + reference + ")" : "");
    }

    /** The verdict block: the line, every finding, and what was not judged. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        for (String f : findings) sb.append("  finding     : ").append(f).append('\n');
        for (String n : notJudged) sb.append("  not judged  : ").append(n).append('\n');
        return sb.append(line()).append('\n').toString();
    }

    /** The verdict as plain data: {@code outcome}, {@code green}, {@code findings}, {@code judged}, {@code not_judged}. */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", "k3-verdict");
        m.put("outcome", outcome.name());
        m.put("words", outcome.words());
        m.put("green", outcome.green());
        m.put("findings", new ArrayList<>(findings));
        m.put("judged", new ArrayList<>(judged));
        m.put("not_judged", new ArrayList<>(notJudged));
        if (reference != null) m.put("reference", reference);
        return m;
    }
}
