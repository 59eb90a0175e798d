package k3j.harness;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.qameta.allure.listener.TestLifecycleListener;
import io.qameta.allure.model.Label;
import io.qameta.allure.model.Status;
import io.qameta.allure.model.TestResult;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import k3j.compare.Conformance;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.PlanVerdict;
import org.junit.platform.engine.TestSource;
import org.junit.platform.engine.support.descriptor.ClassSource;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;

/**
 * What this run will judge, written before its first case, and its verdict, rewritten after every case (docs/report.md,
 * "Plan and verdict"). Into the Allure results folder: {@code k3-run-<id>-plan.json} (the run id, the model and the
 * reference, and every planned item: each selected layer, each MoE layer's experts, the logits full and incremental,
 * the greedy ids) and {@code k3-run-<id>-verdict.json} (from {@link PlanVerdict#decide}); every result this run writes
 * carries the label {@code run=<id>}, so results of another run are never read as this one's. The verdict file is
 * INCOMPLETE from the plan on, naming what is not judged yet, until every planned item is judged and the run ended:
 * a run interrupted (Ctrl-C), killed or crashed leaves an INCOMPLETE verdict naming what it did not judge.
 *
 * <p>{@code -Dk3.run=ID} names the run (ci/test passes one, and the same to ci/report); else a random id per test JVM.
 * {@code -Dk3.haltAfterResults=N} (ci/report-check's interrupted run) stops the run after N results are written: it
 * writes {@code k3-halted} beside them and waits to be interrupted.
 */
public final class RunPlan implements TestExecutionListener, TestLifecycleListener {
    /** The label every result of this run carries. */
    public static final String LABEL = "run";
    static final String FORMAT_PLAN = "k3-plan";

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    private static final Pattern LAYER = Pattern.compile("^L\\s*(\\d+)\\b");
    private static final String LAYER_GATE = "k3j.gates.LayerConformanceGate", LOGIT_GATE = "k3j.gates.LogitParityGate",
            EXPERT_GATE = "k3j.gates.ExpertConformanceGate";

    private static final String RUN = !Project.property("k3.run").isEmpty() ? Project.property("k3.run")
            : !Project.property("k3.run.id").isEmpty() ? Project.property("k3.run.id") : UUID.randomUUID().toString();
    private static final Map<String, Invariants.Item> JUDGED = new LinkedHashMap<>();   // item -> how it was judged
    private static final Map<String, Invariants.Item> RECORDED = new LinkedHashMap<>();   // item -> how its gate judged it, until its result is written
    private static final List<String> PLANNED = new ArrayList<>();
    private static final RunStory STORY = new RunStory();
    private static Map<String, Object> plan;
    private static boolean finished;
    private static int written;

    /** This run's id. */
    public static String id() {
        return RUN;
    }

    @Override
    public void testPlanExecutionStarted(org.junit.platform.launcher.TestPlan testPlan) {
        Set<String> classes = new LinkedHashSet<>();
        for (TestIdentifier root : testPlan.getRoots()) {
            for (TestIdentifier t : testPlan.getDescendants(root)) t.getSource().map(RunPlan::className).ifPresent(classes::add);
        }
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("format", FORMAT_PLAN);
        p.put("run", RUN);
        p.put("started", Instant.now().toString());
        p.put("profile_gates", classes.stream().filter(c -> c.startsWith("k3j.gates.")).map(c -> c.substring("k3j.gates.".length())).toList());
        List<String> items = new ArrayList<>();
        boolean checkpoint = classes.contains(LAYER_GATE) || classes.contains(LOGIT_GATE) || classes.contains(EXPERT_GATE);
        p.put("model", Project.property("k3.candidate").isEmpty() ? orNull(Project.property("k3.model")) : null);
        p.put("candidate", orNull(Project.property("k3.candidate")));
        if (checkpoint) {
            items.add(CHECKPOINT_OPENED);
            try {
                Conformance c = CheckpointUnderTest.open();
                List<Integer> selected = CheckpointUnderTest.selected();
                items.clear();
                items.addAll(CheckpointItems.planned(c, selected, classes.contains(LAYER_GATE), classes.contains(EXPERT_GATE), classes.contains(LOGIT_GATE)));
                p.put("reference", c.dump().source().toString());
                p.put("reference_manifest_sha256", Tamper.sha256(Files.readAllBytes(c.dump().source().resolve("manifest.json"))));
                p.put("reference_producer", c.dump().producer());
                reference = c.dump().producer();
                p.put("engine", c.candidateDump() != null ? c.candidateDump().engine() : "k3j forward");
                STORY.identity((String) p.get("engine"), c.candidateDump() != null ? c.candidateDump().source().toString() : Project.property("k3.model"),
                        c.dump().source().toString(), (String) p.get("reference_manifest_sha256"), c.candidateDump() != null);
                JUDGED.put(CHECKPOINT_OPENED, Invariants.Item.pass(CHECKPOINT_OPENED));
            } catch (ConformException e) {
                // a candidate of another reference or prompt, arrays other than the reference's: refused, as k3 conform refuses it
                p.put("checkpoint_error", String.valueOf(e.getMessage()));
                JUDGED.put(CHECKPOINT_OPENED, openFailure(e));
            } catch (RuntimeException | AssertionError | IOException e) {
                p.put("checkpoint_error", String.valueOf(e.getMessage()));   // the plan stands: nothing of it can be judged
            }
        }
        p.put("checkpoint", checkpoint);
        p.put("items", items);
        synchronized (RunPlan.class) {
            PLANNED.clear();
            PLANNED.addAll(items);
            plan = p;
            write("plan", p);
            writeVerdict();
        }
    }

    @Override
    public void testPlanExecutionFinished(org.junit.platform.launcher.TestPlan testPlan) {
        synchronized (RunPlan.class) {
            finished = true;
            writeVerdict();
        }
    }

    @Override
    public void beforeTestWrite(TestResult t) {
        t.getLabels().add(new Label().setName(LABEL).setValue(RUN));
    }

    @Override
    public void afterTestWrite(TestResult t) {
        String item = item(t);
        int halt;
        synchronized (RunPlan.class) {
            if (item != null && t.getStatus() != Status.SKIPPED) JUDGED.merge(item, judged(item, RECORDED.remove(item), t.getStatus() == Status.PASSED), RunPlan::worse);
            STORY.add(t, item, resultsDir());
            written++;
            if (plan != null) writeVerdict();
            halt = haltAfter();
            if (halt > 0 && written >= halt) write("halted", Map.of("run", RUN, "results", written));
        }
        if (halt > 0 && written >= halt) {
            System.out.println("k3.haltAfterResults=" + halt + ": " + written + " results written; waiting to be interrupted");
            while (true) {
                try {
                    Thread.sleep(60_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    /** The plan's items other than the layers and experts (the names the checkpoint gates give their cases). */
    public static final String CHECKPOINT_OPENED = "the checkpoint under test opened", MODEL_MATCH = "the reference dump matches the model",
            LOGITS_FULL = "logits, full recompute", LOGITS_INCREMENTAL = "logits, incremental", GREEDY = "greedy ids";

    /** The plan item a result judges, by its part and name (the names the checkpoint gates give their cases), or null. */
    static String item(TestResult t) {
        String part = t.getLabels().stream().filter(l -> ReportPart.LABEL.equals(l.getName())).map(Label::getValue).findFirst().orElse("");
        String name = t.getName() == null ? "" : t.getName().replace('\u2007', ' ');
        Matcher m = LAYER.matcher(name);
        if (part.equals(ReportPart.LAYERS.title) && m.find()) return "L" + m.group(1);
        if (part.equals(ReportPart.EXPERTS.title) && m.find()) return "L" + m.group(1) + " experts";
        if (part.equals(ReportPart.MODEL.title) && name.equals(MODEL_MATCH)) return MODEL_MATCH;
        if (part.equals(ReportPart.LOGITS.title)) {
            if (name.startsWith("greedy")) return GREEDY;
            if (name.contains("full recompute")) return LOGITS_FULL;
            if (name.contains("incremental")) return LOGITS_INCREMENTAL;
        }
        return null;
    }

    /**
     * How a gate judged plan item {@code item} (its {@link Invariants} item: not judged, refused or failed, not only
     * passed or failed), recorded before its case's result is written; a case with none recorded is judged by its
     * status alone.
     */
    public static void judged(String item, Invariants.Item how) {
        synchronized (RunPlan.class) {
            RECORDED.merge(item, how, RunPlan::worse);
        }
    }

    /**
     * The checkpoint item of a checkpoint that could not be opened: refused for what k3 conform refuses (another
     * reference or prompt, arrays other than the reference's, a non-finite value), else not judged.
     */
    static Invariants.Item openFailure(ConformException e) {
        boolean refused = e.finding() == Finding.REFERENCE_MISMATCH || e.finding() == Finding.NON_FINITE;
        return refused ? Invariants.Item.refused(CHECKPOINT_OPENED, String.valueOf(e.getMessage())) : Invariants.Item.notJudged(CHECKPOINT_OPENED, String.valueOf(e.getMessage()));
    }

    /** A written case's item: what its gate recorded, else its status; a case that failed after its gate recorded a pass failed. */
    static Invariants.Item judged(String item, Invariants.Item recorded, boolean passed) {
        if (recorded != null && (passed || recorded.status() != Invariants.Status.PASS)) return new Invariants.Item(item, recorded.status(), recorded.why());
        return passed ? Invariants.Item.pass(item) : Invariants.Item.fail(item, "does not conform");
    }

    /** Two judgements of one item (a layer's case and its overview): the one further from a pass (refused, not judged, failed). */
    static Invariants.Item worse(Invariants.Item a, Invariants.Item b) {
        List<Invariants.Status> order = List.of(Invariants.Status.PASS, Invariants.Status.FAIL, Invariants.Status.NOT_JUDGED, Invariants.Status.REFUSED);
        return order.indexOf(b.status()) > order.indexOf(a.status()) ? b : a;
    }

    /** Who computed the checkpoint's reference (ReferenceDump#producer), which the verdict names; null without a checkpoint. */
    private static volatile String reference;

    /** A run whose one decision was made whole by its gate (the probe's {@code Verdict}), or null. */
    private static volatile Map<String, Object> decided;

    /** The run's verdict is {@code verdict} (a {@link k3j.verdict.Verdict#json()}), made by a gate from the one decision: written as it is. */
    public static void decided(Map<String, Object> verdict) {
        synchronized (RunPlan.class) {
            decided = new LinkedHashMap<>(verdict);
            if (plan != null) writeVerdict();
        }
    }

    private static void writeVerdict() {
        if (decided != null) {   // a gate's one decision (the probe's), written as it made it
            Map<String, Object> v = new LinkedHashMap<>(decided);
            v.put("run", RUN);
            v.put("finished", finished);
            v.put("written", Instant.now().toString());
            write("verdict", v);
            return;
        }
        PlanVerdict planned = PlanVerdict.of(PLANNED, JUDGED, finished, Boolean.TRUE.equals(plan.get("checkpoint")));
        Map<String, Object> v = verdictFile(planned, PLANNED, STORY, RUN);
        if (reference != null) v.put("reference", reference);
        v.put("written", Instant.now().toString());
        write("verdict", v);
    }

    /** The verdict file's fields: the one decision over the plan ({@link PlanVerdict#json()}), the run, and the first screen's fields ({@link RunStory}). */
    static Map<String, Object> verdictFile(PlanVerdict planned, List<String> items, RunStory story, String run) {
        Map<String, Object> v = new LinkedHashMap<>(planned.json());
        v.put("run", run);
        v.put("finished", planned.finished());
        v.putAll(story.fields(planned, items));
        return v;
    }

    /** The Allure results folder of this run (allure.results.directory), or null when none is set. */
    static Path resultsDir() {
        String dir = System.getProperty("allure.results.directory", "");
        return dir.isBlank() ? null : Path.of(dir);
    }

    private static int haltAfter() {
        String h = Project.property("k3.haltAfterResults");
        return h.isEmpty() ? 0 : Integer.parseInt(h);
    }

    private static String className(TestSource s) {
        if (s instanceof ClassSource c) return c.getClassName();
        if (s instanceof MethodSource m) return m.getClassName();
        return null;
    }

    private static String orNull(String s) {
        return s.isEmpty() ? null : s;
    }

    /** Writes {@code k3-run-<id>-<what>.json} whole (a temporary file renamed over it). */
    private static void write(String what, Object value) {
        String dir = System.getProperty("allure.results.directory", "");
        if (dir.isBlank()) return;
        try {
            Path results = Path.of(dir);
            Files.createDirectories(results);
            Path tmp = results.resolve(".k3-run-" + RUN + "-" + what + ".json.tmp"), to = results.resolve("k3-run-" + RUN + "-" + what + ".json");
            Files.write(tmp, JSON.writeValueAsBytes(value));
            Files.move(tmp, to, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the run's " + what + " into " + dir, e);
        }
    }
}
