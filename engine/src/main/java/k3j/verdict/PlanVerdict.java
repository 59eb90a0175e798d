package k3j.verdict;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The verdict of a run over its plan (docs/report.md, "Plan and verdict") for the Maven gates and
 * {@code k3 conform --json}: a rendering of the one decision ({@link Invariants#decide}), never a second one. Every
 * planned item is judged with its own status (PASS, FAIL, REFUSED) or not judged; a run that did not end adds "the
 * run: did not end" as not judged. A run that planned no checkpoint says only that: NO CHECKPOINT CHECKED
 * (INCOMPLETE if it did not end), and its verdict is not green.
 *
 * @param verdict    the one decision over the plan's items
 * @param checkpoint whether the run planned a checkpoint (false: the outcome is NO_CHECKPOINT when the run ended)
 */
public record PlanVerdict(Verdict verdict, boolean checkpoint, boolean finished) {
    /** The verdict file's format name (the same as the engine's verdicts write). */
    public static final String FORMAT = "k3-verdict";

    /**
     * The plan's verdict: {@code planned} items in plan order, {@code judged} item -> how it came out (an item absent
     * is not judged), whether the run ended, whether it planned a checkpoint.
     */
    public static PlanVerdict of(List<String> planned, Map<String, Invariants.Item> judged, boolean finished, boolean checkpoint) {
        List<Invariants.Item> items = new ArrayList<>();
        for (String item : planned) {
            Invariants.Item i = judged.get(item);
            items.add(i == null ? Invariants.Item.notJudged(item, "") : new Invariants.Item(item, i.status(), i.why()));
        }
        if (!finished) items.add(Invariants.Item.notJudged("the run", "did not end: interrupted, killed or crashed (or still running)"));
        return new PlanVerdict(Invariants.decide(Invariants.Mode.FLOAT32, items), checkpoint, finished);
    }

    /**
     * The same from a pass or fail per item, for a runner whose results say only passed or failed (the Maven gates' Allure
     * statuses): true is PASS, false FAIL. A runner that knows more (a refusal, a missing stage) gives {@link #of} its items.
     */
    public static PlanVerdict decide(List<String> planned, Map<String, Boolean> judged, boolean finished, boolean checkpoint) {
        Map<String, Invariants.Item> items = new LinkedHashMap<>();
        judged.forEach((k, ok) -> items.put(k, ok ? Invariants.Item.pass(k) : Invariants.Item.fail(k, "does not conform")));
        return of(planned, items, finished, checkpoint);
    }

    /** {@code CONFORMS}, {@code DOES_NOT_CONFORM}, {@code INCOMPLETE}, {@code REFUSED} (the decision's outcome) or {@code NO_CHECKPOINT}. */
    public String outcome() {
        return !checkpoint && finished ? "NO_CHECKPOINT" : verdict.outcome().name();
    }

    /** The words the report shows. */
    public String words() {
        return !checkpoint && finished ? "NO CHECKPOINT CHECKED" : verdict.outcome().words();
    }

    public List<String> findings() {
        return verdict.findings();
    }

    /** The planned items judged, in plan order. */
    public List<String> judged() {
        return verdict.judged();
    }

    /** What was not judged, each with why. */
    public List<String> notJudged() {
        return verdict.notJudged();
    }

    /** The verdict file's fields: the verdict's own ({@link Verdict#json()}), the outcome and words of a run that planned no checkpoint. */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>(verdict.json());
        m.put("outcome", outcome());
        m.put("words", words());
        m.put("green", checkpoint && verdict.green());
        return m;
    }
}
