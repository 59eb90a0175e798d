package k3j.verdict;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What one run decided: one immutable value, made only by the one decision ({@link Invariants#decide}; docs/semantics.md
 * §10.11): the outcome, the first divergence and its category, what was judged and what was planned but not judged,
 * and the reference it was judged against. Every entry point (conform, conform --lossy, --against, --merge,
 * compare-logits in all its forms, bisect, the API and the gates) prints {@link #line()} and exits by
 * {@link #exitCode()}; {@link #json()} is the small file a run writes and the report renders.
 *
 * @param findings        one line per thing that is not green (empty when the outcome is green)
 * @param judged          what the verdict covers
 * @param notJudged       what was planned and not judged (non-empty makes the outcome at best INCOMPLETE)
 * @param firstDivergence the first item that failed or was refused, in the order judged, or null
 * @param category        the category tag of the first finding that has one ({@code [binding error]}), or null
 * @param reference       who computed the reference it was judged against ({@code ReferenceDump.producer()}), or null
 * @param prompt          the reference's prompt: its id count and the sha256 of its ids ({@code ReferenceDump.promptId()}), or null
 */
public record Verdict(Outcome outcome, List<String> findings, List<String> judged, List<String> notJudged, String firstDivergence, String category,
                      String reference, String prompt) {
    public Verdict {
        java.util.Objects.requireNonNull(outcome, "outcome");
        findings = List.copyOf(findings);
        judged = List.copyOf(judged);
        notJudged = List.copyOf(notJudged);
    }

    /** This verdict, naming the reference: its producer (the line and JSON then say "reference: k3j VERSION, not torch" for a reference k3j wrote) and prompt. */
    public Verdict against(String producer, String prompt) {
        return new Verdict(outcome, findings, judged, notJudged, firstDivergence, category, producer, prompt);
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

    /**
     * The one exit code of every command that judges (docs/semantics.md §7.9): 0 green; 1 a judged item failed;
     * 2 refused (the input broke an invariant: a usage-level refusal, as for a refused file); 3 INCOMPLETE (something
     * planned was not judged).
     */
    public int exitCode() {
        return switch (outcome) {
            case CONFORMS, WITHIN -> 0;
            case DOES_NOT_CONFORM, OUTSIDE -> 1;
            case REFUSED -> 2;
            case INCOMPLETE -> 3;
        };
    }

    /** The category named in {@code why}: the earliest {@link Finding} tag in it, or null (bracketed text such as "tokens[0]" is no category). */
    static String category(String why) {
        String best = null;
        int at = Integer.MAX_VALUE;
        for (Finding f : Finding.values()) {
            int i = why.indexOf(f.tag());
            if (i >= 0 && i < at) {
                at = i;
                best = f.tag();
            }
        }
        return best;
    }

    /** "VERDICT: DOES NOT CONFORM [binding error]": the outcome and the category of its first finding, when it has one (the findings are listed above it). */
    public String line() {
        return "VERDICT: " + outcome.words() + (category != null ? " " + category : "")
                + (reference != null && !reference.startsWith("reference: torch") ? " (" + reference + ")" : "");
    }

    /** The verdict block: the line, every finding, and what was not judged. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        for (String f : findings) sb.append("  finding     : ").append(f).append('\n');
        for (String n : notJudged) sb.append("  not judged  : ").append(n).append('\n');
        return sb.append(line()).append('\n').toString();
    }

    /**
     * The verdict as plain data: {@code format}, {@code outcome}, {@code words}, {@code green}, {@code findings},
     * {@code judged}, {@code not_judged}, {@code exit_code}, {@code line}, and when known {@code first_divergence},
     * {@code category}, {@code reference} and {@code prompt}.
     */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", "k3-verdict");
        m.put("outcome", outcome.name());
        m.put("words", outcome.words());
        m.put("green", outcome.green());
        m.put("findings", new ArrayList<>(findings));
        m.put("judged", new ArrayList<>(judged));
        m.put("not_judged", new ArrayList<>(notJudged));
        m.put("exit_code", exitCode());
        m.put("line", line());
        if (firstDivergence != null) m.put("first_divergence", firstDivergence);
        if (category != null) m.put("category", category);
        if (reference != null) m.put("reference", reference);
        if (prompt != null) m.put("prompt", prompt);
        return m;
    }
}
