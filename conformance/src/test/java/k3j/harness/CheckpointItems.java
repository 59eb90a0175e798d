package k3j.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.compare.Causes;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LogitParity;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.PlanVerdict;

/**
 * The items a run of the checkpoint gates plans and how each one is judged, in one place for the gates, {@link RunPlan}
 * (which writes the run's verdict file from them) and the property gate that holds the verdict file to every other
 * door. Each item is judged with its own status: a stage or logits array the candidate does not hold is not judged
 * (INCOMPLETE, as {@code k3 conform} says), a non-finite value or an input of another reference is refused, a value
 * over budget fails.
 */
public final class CheckpointItems {
    private CheckpointItems() {}

    private static final ObjectMapper JSON = new ObjectMapper();

    /** The items planned over {@code c}, in plan order: for the layer gate the model match and each selected layer, each MoE layer's experts, the logits and greedy ids. */
    public static List<String> planned(Conformance c, List<Integer> selected, boolean layerGate, boolean expertGate, boolean logitGate) {
        List<String> items = new ArrayList<>(List.of(RunPlan.CHECKPOINT_OPENED));
        if (layerGate) {
            items.add(RunPlan.MODEL_MATCH);
            for (int l : selected) items.add("L" + l);
        }
        if (expertGate && c.candidateDump() == null) for (int l : c.moeLayers(selected)) items.add("L" + l + " experts");
        if (logitGate) items.addAll(List.of(RunPlan.LOGITS_FULL, RunPlan.LOGITS_INCREMENTAL, RunPlan.GREEDY));
        return items;
    }

    /** Whether the checkpoint's reference dump matches its model: a tensor the model lacks is a failure of the match. */
    public static Invariants.Item modelMatch(Conformance c) {
        return c.bindFailure() == null ? Invariants.Item.pass(RunPlan.MODEL_MATCH)
                : Invariants.Item.fail(RunPlan.MODEL_MATCH, Finding.MISSING_TENSOR.tag() + " " + c.bindFailure().getMessage());
    }

    /** Every selected layer's report, its cause read from all of them together (docs/semantics.md §10.10). */
    public static List<LayerReport> layers(Conformance c, List<Integer> selected) {
        List<LayerReport> all = new ArrayList<>();
        for (int l : selected) all.add(c.layer(l));
        return Causes.classify(all, c.dump());
    }

    /** An item whose judging stopped on {@code e}: an array the candidate does not hold is not judged; anything else it cannot judge is refused. */
    public static Invariants.Item unjudged(String item, ConformException e) {
        return e.finding() == Finding.MISSING_STAGE ? Invariants.Item.notJudged(item, e.getMessage()) : Invariants.Item.refused(item, e.getMessage());
    }

    /** The teacher-forced logits (full recompute or incremental) against the reference's. */
    public static Invariants.Item logits(Conformance c, boolean incremental) {
        String item = incremental ? RunPlan.LOGITS_INCREMENTAL : RunPlan.LOGITS_FULL;
        try {
            return LogitParity.item(item, c.teacherForcing(incremental), false);
        } catch (ConformException e) {
            return unjudged(item, e);
        }
    }

    /** Greedy generation against the reference's ids. */
    public static Invariants.Item greedy(Conformance c) {
        try {
            return LogitParity.greedyItem(c.greedy(), null);
        } catch (ConformException e) {
            return unjudged(RunPlan.GREEDY, e);
        }
    }

    /**
     * The verdict file a {@code -Pcandidate} run of the layer and logit gates over {@code layers} writes for
     * {@code candidate} against {@code reference} ({@code k3-run-<run>-verdict.json}, with its plan beside it, into
     * {@code results}), made in this JVM by the functions the gates and {@link RunPlan} use; returns its fields.
     */
    public static Map<String, Object> candidateRun(Path candidate, Path reference, List<Integer> layers, String run, Path results) throws IOException {
        List<String> planned;
        Map<String, Invariants.Item> judged = new LinkedHashMap<>();
        RunStory story = new RunStory();
        try (Conformance c = Conformance.candidate(candidate, reference, List.of())) {
            planned = planned(c, layers, true, false, true);
            judged.put(RunPlan.CHECKPOINT_OPENED, Invariants.Item.pass(RunPlan.CHECKPOINT_OPENED));
            story.identity(c.candidateDump().engine(), candidate.toString(), c.dump().source().toString(), c.dump().manifestSha256(), true);
            judged.put(RunPlan.MODEL_MATCH, modelMatch(c));
            for (LayerReport r : layers(c, layers)) judged.put("L" + r.layer(), r.item());
            judged.put(RunPlan.LOGITS_FULL, logits(c, false));
            judged.put(RunPlan.LOGITS_INCREMENTAL, logits(c, true));
            judged.put(RunPlan.GREEDY, greedy(c));
        } catch (ConformException e) {
            planned = List.of(RunPlan.CHECKPOINT_OPENED);
            judged.put(RunPlan.CHECKPOINT_OPENED, RunPlan.openFailure(e));
        }
        Map<String, Object> v = RunPlan.verdictFile(PlanVerdict.of(planned, judged, true, true), planned, story, run);
        Files.createDirectories(results);
        Files.writeString(results.resolve("k3-run-started.json"), "{\"format\":\"k3-run-started\",\"run\":\"" + run + "\"}");
        Files.writeString(results.resolve("k3-run-" + run + "-plan.json"), JSON.writeValueAsString(Map.of("format", RunPlan.FORMAT_PLAN, "run", run, "items", planned)));
        Files.writeString(results.resolve("k3-run-" + run + "-verdict.json"), JSON.writeValueAsString(v));
        return v;
    }
}
