package k3j.conform;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The verdict of a run over its plan (docs/report.md, "Plan and verdict"), decided in one place for the Maven gates and
 * {@code k3 conform --json}; the report renders it and never decides one itself. INCOMPLETE, naming what is missing, when anything planned is not judged (not run, skipped) or
 * the run did not end; else DOES NOT CONFORM when a judged item failed; else CONFORMS. A run that planned no
 * checkpoint says only that: NO CHECKPOINT CHECKED (INCOMPLETE if it did not end).
 *
 * @param outcome   {@code CONFORMS}, {@code DOES_NOT_CONFORM}, {@code INCOMPLETE} or {@code NO_CHECKPOINT}
 * @param findings  one line per thing that is not green
 * @param judged    the planned items judged, in plan order
 * @param notJudged the planned items not judged, in plan order
 */
public record PlanVerdict(String outcome, List<String> findings, List<String> judged, List<String> notJudged) {
    /** The verdict file's format name (the same as the engine's verdicts write). */
    public static final String FORMAT = "k3-verdict";

    public PlanVerdict {
        findings = List.copyOf(findings);
        judged = List.copyOf(judged);
        notJudged = List.copyOf(notJudged);
    }

    /** The one decision: {@code planned} items, {@code judged} item -> conforms, whether the run ended, whether it planned a checkpoint. */
    public static PlanVerdict decide(List<String> planned, Map<String, Boolean> judged, boolean finished, boolean checkpoint) {
        List<String> done = new ArrayList<>(), missing = new ArrayList<>(), findings = new ArrayList<>();
        for (String item : planned) {
            Boolean ok = judged.get(item);
            if (ok == null) {
                missing.add(item);
            } else {
                done.add(item);
                if (!ok) findings.add(item + " does not conform");
            }
        }
        if (!finished) findings.addFirst("the run did not end: interrupted, killed or crashed (or still running)");
        if (!missing.isEmpty()) findings.addFirst("planned but not judged: " + missing.size() + " of " + planned.size() + " (" + abbreviate(missing) + ")");
        // the outcome comes from the one decision every verdict goes through (Invariants.decide, docs/semantics.md §10.11)
        List<Invariants.Item> items = new ArrayList<>();
        for (String item : planned) {
            Boolean ok = judged.get(item);
            items.add(ok == null ? Invariants.Item.notJudged(item, "planned, not judged") : ok ? Invariants.Item.pass(item) : Invariants.Item.fail(item, "does not conform"));
        }
        if (!finished) items.add(Invariants.Item.notJudged("the run", "did not end"));
        String outcome = !checkpoint ? (finished ? "NO_CHECKPOINT" : "INCOMPLETE") : Invariants.decide(Invariants.Mode.FLOAT32, items).outcome().name();
        return new PlanVerdict(outcome, findings, done, missing);
    }

    /** The words the report shows. */
    public String words() {
        return switch (outcome) {
            case "DOES_NOT_CONFORM" -> "DOES NOT CONFORM";
            case "NO_CHECKPOINT" -> "NO CHECKPOINT CHECKED";
            default -> outcome;
        };
    }

    /** The verdict file's fields (the form the engine's verdicts write: format, outcome, words, green, findings, judged, not_judged). */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("format", FORMAT);
        m.put("outcome", outcome);
        m.put("words", words());
        m.put("green", outcome.equals("CONFORMS"));
        m.put("findings", findings);
        m.put("judged", judged);
        m.put("not_judged", notJudged);
        return m;
    }

    private static String abbreviate(List<String> items) {
        return items.size() <= 12 ? String.join(", ", items) : String.join(", ", items.subList(0, 12)) + ", ... " + (items.size() - 12) + " more";
    }
}
