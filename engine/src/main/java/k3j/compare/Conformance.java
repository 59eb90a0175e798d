package k3j.compare;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.function.Consumer;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.dump.Budget;
import k3j.dump.CandidateDump;
import k3j.dump.DumpCheck;
import k3j.dump.DumpLayout;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.dump.Stage;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.BindException;
import k3j.model.DecodeState;
import k3j.model.ExpertDropException;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.LayerStages;
import k3j.model.Model;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * A model directory and the reference dump made for it, ready to compare (the checkpoint gates and
 * {@code k3 conform}): {@link #layer(int)} runs ONE layer alone from the dump's own inputs (its incoming
 * partial sum and the snapshots it sees, fresh state, all T tokens in one call: docs/formats.md §7.6), so a bad layer
 * cannot poison the next; {@link #teacherForcing(boolean)} and {@link #greedy()} compare logits.
 *
 * <p>Open order: the dump is located and matched first (headers only), then the model is bound. A model that
 * does not bind is kept as {@link #bindFailure()}: the layers it names report {@link Finding#MISSING_TENSOR}
 * with their own problem lines.
 */
public final class Conformance implements AutoCloseable {
    private final Path modelDir;
    private final ReferenceDump dump;
    private final Budget budget;
    private final Assembly assembly;
    private final BindException bindFailure;
    private final Forward forward;
    private final ModelConfig config;
    /** when the model does not bind: the layers before the first unbindable one, bound alone (else null) */
    private final Assembly prefixAssembly;
    private final Forward prefixForward;
    private final int[] ids;
    private final int tokens, hidden;
    private ExpertSweep sweep;
    /** the activations under test when another engine wrote them (null: k3j's own forward runs) */
    private final CandidateDump candidate;

    /** What a comparison runs on: k3j's forward (bound here, or given), or another engine's candidate dump. */
    private Conformance(Path modelDir, ReferenceDump dump, ModelConfig config, Assembly assembly, BindException bindFailure, Forward forward,
                        Assembly prefixAssembly, Forward prefixForward, CandidateDump candidate) {
        this.modelDir = modelDir;
        this.dump = dump;
        this.budget = dump.budget();
        this.ids = dump.ids();
        this.tokens = ids.length;
        this.config = config;
        this.assembly = assembly;
        this.bindFailure = bindFailure;
        this.forward = forward;
        this.prefixAssembly = prefixAssembly;
        this.prefixForward = prefixForward;
        this.hidden = config.hiddenSize();
        this.candidate = candidate;
        checkShape();
    }

    private static ReferenceDump withIds(ReferenceDump dump) {
        if (dump.ids().length < 1) throw ReferenceDump.mismatch(dump.source() + ": manifest ids is empty");
        return dump;
    }

    /** Binds {@code modelDir} once through an {@link Assembly} that {@code load} opens; a model that does not bind is kept as {@link #bindFailure()}. */
    private static Conformance bound(Path modelDir, ReferenceDump dump, Workers workers, Consumer<Assembly> load) {
        withIds(dump);
        ModelConfig config = ConfigReader.read(modelDir.resolve("config.json"));
        Assembly a = null;
        BindException bf = null;
        try {
            a = Assembly.bind(modelDir, config, -1);
            load.accept(a);
        } catch (BindException e) {
            bf = e;
        } catch (k3j.io.CheckpointException e) {
            if (a != null) a.close();
            throw new ConformException(Finding.MISSING_TENSOR, "the checkpoint " + modelDir + " cannot be read as a whole: " + e.getMessage(), e);
        } catch (RuntimeException e) {   // the load refused (a memory plan that does not fit) or failed (a trunk that does not match)
            if (a != null) a.close();
            throw e;
        }
        // the layers before the first one that cannot bind still run: bind that prefix alone
        Assembly prefix = null;
        if (bf != null && !bf.layers().isEmpty() && bf.layers().getFirst() > 0) {
            try {
                prefix = Assembly.bind(modelDir, config, bf.layers().getFirst());
                load.accept(prefix);
            } catch (BindException modelLevelToo) {
                if (prefix != null) prefix.close();
                prefix = null;
            }
        }
        return new Conformance(modelDir, dump, config, a, bf, a == null ? null : a.forward(workers), prefix,
                prefix == null ? null : prefix.forward(workers), null);
    }

    /**
     * Judges another engine's candidate dump against the reference it was made from: {@code reference} when
     * given (refused if the candidate names another), else the dump in {@code searchDirs} whose manifest sha256
     * the candidate names. No model is bound and no k3j forward runs; the layers, budgets, categories and logit
     * figures are those of a k3j run.
     */
    public static Conformance candidate(Path candidate, Path reference, List<Path> searchDirs) {
        CandidateDump c = CandidateDump.open(candidate);
        ReferenceDump d = reference != null ? ReferenceDump.open(reference) : ReferenceMatch.locateBySha256(c.referenceSha256(), c.manifest().path("reference").path("dir").asText(""), searchDirs);
        ModelConfig config = ConfigReader.read(withIds(d).field("config"), d.source() + " manifest config");
        c.requireFits(d);
        return new Conformance(null, d, config, null, null, null, null, null, c);
    }

    /** The candidate under test (null when k3j's own forward is). */
    public CandidateDump candidateDump() {
        return candidate;
    }

    /** What is under test: "k3j forward" or the candidate's engine and precision. */
    public String engine() {
        return candidate != null ? candidate.engine() + " from " + candidate.source() : "k3j forward" + (modelDir != null ? " on " + modelDir : "");
    }

    /**
     * Everything in the dump that steers a verdict, against the model's config and the harness's own
     * derivation, before any layer runs: layer count and map, each layer's mixer, MLP, boundary and snapshot
     * counts, the boundaries, the ids, the budget, and every array (present, shaped, hashed, sized; see
     * {@link DumpLayout}). A disagreement is refused naming the field.
     */
    private void checkShape() {
        check(dump, config);
    }

    /** {@link #checkShape()} for a dump and a config alone (no model): the dump fuzz target and {@code k3 conform} share it ({@link DumpCheck}). */
    public static void check(ReferenceDump dump, ModelConfig config) {
        DumpCheck.against(dump, config);
    }

    /**
     * Compares a forward that is already built (its weights possibly altered: the mutation gate) against a
     * dump; no matching, the caller owns the forward. {@link #close()} closes nothing.
     */
    public static Conformance of(Forward forward, ReferenceDump dump) {
        return new Conformance(null, withIds(dump), forward.weights().config(), null, null, forward, null, null, null);
    }

    /**
     * Opens {@code modelDir} with {@code reference} (null = the one dump in {@code searchDirs}, in the model
     * directory or next to it whose manifest matches the model's shards; see {@link ReferenceMatch}).
     */
    public static Conformance open(Path modelDir, Path reference, List<Path> searchDirs, Workers workers) {
        return open(modelDir, reference, searchDirs, workers, RESIDENT);
    }

    /** {@link #open(Path, Path, List, Workers)} with the runtime loaded by {@code load} (see {@link #open(Path, ReferenceDump, Workers, Consumer)}). */
    public static Conformance open(Path modelDir, Path reference, List<Path> searchDirs, Workers workers, Consumer<Assembly> load) {
        if (modelDir == null || !Files.isDirectory(modelDir)) throw new IllegalArgumentException("no model directory " + modelDir);
        return open(modelDir, ReferenceMatch.locate(modelDir, reference, searchDirs), workers, load);
    }

    /** Opens with a dump already matched (or deliberately unmatched: tests). */
    public static Conformance open(Path modelDir, ReferenceDump dump, Workers workers) {
        return open(modelDir, dump, workers, RESIDENT);
    }

    /**
     * Opens with the runtime loaded by {@code load} once the checkpoint is bound: {@link #RESIDENT}, or a
     * streamed trunk and an expert cache opened on the {@link Assembly} as a run would.
     */
    public static Conformance open(Path modelDir, ReferenceDump dump, Workers workers, Consumer<Assembly> load) {
        return bound(modelDir, dump, workers, load);
    }

    /** Every layer and routed expert resident. */
    public static final Consumer<Assembly> RESIDENT = a -> a.model(true);

    public Path modelDir() {
        return modelDir;
    }

    public ReferenceDump dump() {
        return dump;
    }

    public Budget budget() {
        return budget;
    }

    /** The forward under test (null when the model did not bind). */
    public Forward forward() {
        return forward;
    }

    /** null when the model did not bind ({@link #bindFailure()}) or the forward was given ({@link #of}). */
    public Model model() {
        return assembly == null ? null : assembly.model();
    }

    public BindException bindFailure() {
        return bindFailure;
    }

    public int layerCount() {
        return dump.layerCount();
    }

    public int tokens() {
        return tokens;
    }

    // ------------------------------------------------------------------ per layer

    /** Runs layer {@code i} alone from the dump's inputs and compares every stage and the routing. Never throws for the layer's own faults. */
    public LayerReport layer(int i) {
        ReferenceDump.LayerInfo info = dump.layer(i);
        return switch (run(i)) {
            case LayerRun.Ran r -> compare(i, info, r.stages(), candidate != null ? null : forcedRun(i, info), System.nanoTime() - (long) (r.seconds() * 1e9));
            case LayerRun.Failed f -> f.report();
        };
    }

    /** k3j's forward of layer {@code i} from the dump's inputs with the MoE selection forced (after a near-tie). */
    private java.util.function.Function<int[], LayerStages> forcedRun(int i, ReferenceDump.LayerInfo info) {
        Forward f = forward != null ? forward : prefixForward;
        float[] partialIn = dump.f32("layers." + i + ".partial_in");
        List<float[]> snaps = dump.snapshots(info.snapshotsAttn(), tokens, hidden);
        return forced -> f.runLayer(i, partialIn, snaps, tokens, forced);
    }

    /**
     * The activations under test for layer {@code i}: k3j's forward run alone from the dump's inputs, or the
     * candidate's stages; a layer that cannot run (or that the candidate does not hold) is a failed run carrying
     * its report.
     */
    public LayerRun run(int i) {
        ReferenceDump.LayerInfo info = dump.layer(i);
        return candidate != null ? candidateRun(i, info) : engineRun(i, info);
    }

    private LayerRun engineRun(int i, ReferenceDump.LayerInfo info) {
        String kind = info.kind();
        long t0 = System.nanoTime();
        Forward f = forward != null ? forward : prefixForward != null && i < prefixForward.layerCount() ? prefixForward : null;
        if (f == null) {
            List<String> own = bindFailure.problems().stream().filter(q -> q.contains(".layers." + i + ".")).toList();
            String msg = bindFailure.layers().contains(i)
                    ? Finding.MISSING_TENSOR.tag() + " L" + i + " " + kind + ": " + String.join("; ", own)
                    : Finding.MISSING_TENSOR.tag() + " L" + i + " " + kind + " not run: the checkpoint does not bind (" + firstLine(bindFailure.getMessage()) + ")";
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.MISSING_TENSOR, msg, 0));
        }
        String p = "layers." + i + ".";
        float[] partialIn = dump.f32(p + "partial_in");
        List<float[]> snaps = dump.snapshots(info.snapshotsAttn(), tokens, hidden);
        try {
            return new LayerRun.Ran(f.runLayer(i, partialIn, snaps, tokens), secs(t0));
        } catch (ExpertDropException e) {
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.MISSING_TENSOR, Finding.MISSING_TENSOR.tag() + " L" + i + " " + kind + ": " + e.getMessage(), secs(t0)));
        } catch (RuntimeException e) {
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.BINDING_ERROR,
                    Finding.BINDING_ERROR.tag() + " L" + i + " " + kind + ": the layer failed to run: " + e, secs(t0)));
        }
    }

    private LayerRun candidateRun(int i, ReferenceDump.LayerInfo info) {
        String kind = info.kind(), head = " L" + i + " " + kind + ": ";
        if (!candidate.lists(i)) {
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.MISSING_STAGE, Finding.MISSING_STAGE.tag() + head + "the candidate does not list this layer", 0));
        }
        String error = candidate.layerError(i);
        if (!error.isEmpty()) {
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.MISSING_STAGE, Finding.MISSING_STAGE.tag() + head + "no stage in the candidate: the engine could not run the layer (" + error + ")", 0));
        }
        String mixer = candidate.mixer(i);
        if (!mixer.isEmpty() && !mixer.equals(info.mixer())) {
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.BINDING_ERROR, Finding.BINDING_ERROR.tag() + head + "the engine ran it as " + mixer + ", the reference's layer is " + info.mixer(), 0));
        }
        String mlp = candidate.mlp(i);
        if (!mlp.isEmpty() && !mlp.equals(info.mlp())) {   // invariant 3: layer 0 of the release is dense; a port running it as moe is wrong there
            return new LayerRun.Failed(LayerReport.notRun(i, kind, Finding.BINDING_ERROR, Finding.BINDING_ERROR.tag() + head + "the engine ran its MLP as " + mlp + ", the reference's is " + info.mlp(), 0));
        }
        return new LayerRun.Ran(candidate.stages(i, tokens), 0);
    }

    /**
     * Every stage of a run of layer {@code i} and, on a MoE layer, its routing, compared against the dump and
     * judged; a stage the run does not hold (null: a candidate dump without it) is missing, never zero.
     */
    public LayerReport compare(int i, ReferenceDump.LayerInfo info, LayerStages st, double seconds) {
        return compare(i, info, st, null, System.nanoTime() - (long) (seconds * 1e9));
    }

    /**
     * Every stage of a run of layer {@code i} and, on a MoE layer, its routing, compared against the dump and judged.
     * When the routing differs only at reference near-ties ({@link Routing}) and {@code rerun} is given, the layer
     * runs again with the reference's routing forced ({@code rerun.apply(moe_idx)}) and THAT run's stages are
     * compared, so the rest of the layer is still checked.
     */
    public LayerReport compare(int i, ReferenceDump.LayerInfo info, LayerStages st, java.util.function.Function<int[], LayerStages> rerun, long t0) {
        String p = "layers." + i + ".";
        List<String> missing = new ArrayList<>();
        Routing routing = null;
        if (info.mlp().equals("moe")) {
            int[] want = dump.i32(p + "moe_idx");
            int k = dump.shape(p + "moe_idx")[1];
            for (int j = 0; j < want.length; j++) {
                if (want[j] < 0 || want[j] >= config.expertCount()) {
                    throw new ConformException(Finding.REFERENCE_MISMATCH, dump.source() + ": " + p + "moe_idx[" + j / k + "][" + j % k + "] = " + want[j]
                            + ", but the model has " + config.expertCount() + " routed experts (0.." + (config.expertCount() - 1) + "): not this model's dump");
                }
            }
            if (st.moeIdx() == null) missing.add("moe_idx");
            else {
                float[] choice = dump.has(p + "moe_choice") ? dump.f32(p + "moe_choice") : null;
                int experts = choice == null ? 0 : dump.shape(p + "moe_choice")[1];
                if (choice != null) Routing.checkReference(want, choice, k, experts, dump.source() + ": layers." + i);
                routing = Routing.compare(want, st.moeIdx(), k, choice, experts, choiceTolerance(i));
                if (routing.onlyNearTies() && rerun != null) st = rerun.apply(want);
            }
        }
        List<StageMetric> metrics = new ArrayList<>();
        for (Stage s : Stage.values()) {
            float[] got = s.of(st);
            if (got == null) missing.add(s.dumpName());
            else metrics.add(StageMetric.of(s.dumpName(), budget.width(s.dumpName()), got, dump.f32(p + s.dumpName()), budget.of(s.dumpName())));
        }
        if (info.mlp().equals("moe")) {
            if (st.moeWeight() == null) missing.add(Stage.MOE_WEIGHT);
            else metrics.add(StageMetric.of(Stage.MOE_WEIGHT, budget.width(Stage.MOE_WEIGHT), st.moeWeight(), dump.f32(p + Stage.MOE_WEIGHT), budget.of(Stage.MOE_WEIGHT)));
        }
        if (info.mixer().equals("KDA") && dump.has("layers." + i + ".kda_state")) {
            // the state after the call (docs/formats.md §7.6) has no budget width of its own: the dump's atol_layer, as a ratio to max|ref|
            var s = st.kdaState();   // k3j's forward always returns it; a candidate may leave its states out (not judged then)
            if (s != null) {
                metrics.add(state(i, "kda_state", s.recurrent()));
                metrics.add(state(i, "q_conv_state", s.qConv()));
                metrics.add(state(i, "k_conv_state", s.kConv()));
                metrics.add(state(i, "v_conv_state", s.vConv()));
            }
        }
        return judge(i, info.kind(), metrics, routing, missing, secs(t0));
    }

    /**
     * A state after the call, judged as a ratio to max|ref| against the bound the harness derives: the budget rule at the
     * hidden width (the states are built from projections of the hidden vector). The dump's {@code atol_layer} may
     * tighten it and is refused when it would loosen it ({@link #tightened}).
     */
    private StageMetric state(int layer, String name, float[] engine) {
        float[] ref = dump.f32("layers." + layer + "." + name);
        double maxRef = Budget.absMax(ref), derived = budget.ofWidth(hidden);
        double ratioBound = maxRef > 0 ? tightened(layer, name, derived * maxRef) / maxRef : derived;
        return StageMetric.of(name, ref.length, engine, ref, ratioBound);
    }

    /**
     * The near-tie score tolerance of layer {@code i}: the harness's bound on float32 drift of a selection score, the
     * budget rule at width N times the layer's max|reference score|, tightened by the dump's moe_choice
     * {@code atol_layer} when it states one (0, no near-tie rule, when the dump has no moe_choice atol at all).
     */
    double choiceTolerance(int i) {
        if (tolerance(i, "moe_choice", "atol_layer") == null) return 0;
        String key = "layers." + i + ".moe_choice";
        float[] choice = dump.f32(key);
        double derived = budget.ofWidth(dump.shape(key)[1]) * Budget.absMax(choice);
        return tightened(i, "moe_choice", derived);
    }

    /** The dump's tolerances.layers[i].stages.STAGE.KIND, or null when it states none (its JSON type is checked at open). */
    private Double tolerance(int layer, String stage, String kind) {
        com.fasterxml.jackson.databind.JsonNode v = dump.manifest().path("tolerances").path("layers").path(layer).path("stages").path(stage).get(kind);
        return v == null || v.isNull() ? null : v.doubleValue();
    }

    /**
     * A dump may tighten what the harness derives, never loosen it: the dump's atol_layer for {@code stage} when it is
     * at most {@code derived}, {@code derived} when the dump states none, and a refusal naming the key when it is not a
     * positive finite number or is looser (a dump saying 1e30 or -1 would pass any engine: -1 makes every ratio
     * negative, and a negative ratio is under any budget).
     */
    private double tightened(int layer, String stage, double derived) {
        Double atol = tolerance(layer, stage, "atol_layer");
        if (atol == null) return derived;
        String key = dump.source() + ": manifest tolerances.layers[" + layer + "].stages." + stage + ".atol_layer";
        if (!(atol > 0) || !Double.isFinite(atol)) throw ReferenceDump.mismatch(key + " = " + atol + " is not a positive finite number");
        if (atol > derived * (1 + 1e-9)) {
            throw ReferenceDump.mismatch(String.format(Locale.ROOT, "%s = %.6g is looser than the harness's own bound %.6g (eps32 * sqrt(width) * factor * max|ref|);"
                    + " a dump may only tighten a tolerance", key, atol, derived));
        }
        return atol;
    }

    /**
     * The verdict of one layer's metrics: the worst stage's band; a routing difference is a binding error unless
     * the near-tie rule explains every differing token, which (with every stage in budget) is {@link Finding#NEAR_TIE}.
     */
    public static LayerReport judge(int layer, String kind, List<StageMetric> metrics, Routing routing, double seconds) {
        return judge(layer, kind, metrics, routing, List.of(), seconds);
    }

    /** The same with stages a candidate does not hold: missing unless a stage it does hold is a binding error or not finite. */
    public static LayerReport judge(int layer, String kind, List<StageMetric> metrics, Routing routing, List<String> missing, double seconds) {
        StageMetric worst = null, firstOver = null, firstNonFinite = null;
        for (StageMetric m : metrics) {
            if (worst == null || !(m.ratioToBudget() <= worst.ratioToBudget())) worst = m;
            if (firstOver == null && !(m.ratioToBudget() <= 1.0)) firstOver = m;
            if (firstNonFinite == null && !m.finite()) firstNonFinite = m;
        }
        Finding f = worst == null ? Finding.CONFORMS : Finding.ofRatio(worst.ratioToBudget());
        if (routing != null && routing.wrong()) f = Finding.BINDING_ERROR;
        if (!missing.isEmpty() && f != Finding.BINDING_ERROR) f = Finding.MISSING_STAGE;
        else if (f == Finding.CONFORMS && routing != null && routing.onlyNearTies()) f = Finding.NEAR_TIE;
        if (firstNonFinite != null) f = Finding.NON_FINITE;
        String msg = "";
        if (f != Finding.CONFORMS) {
            StringBuilder sb = new StringBuilder(f.tag()).append(" L").append(layer).append(' ').append(kind).append(": ");
            if (firstNonFinite != null) {
                sb.append(firstNonFinite.stage()).append(" is not finite (").append(firstNonFinite.finiteCounts()).append(')');
                if (!missing.isEmpty() || firstOver != null || routing != null && !routing.equal()) sb.append("; ");
            }
            if (!missing.isEmpty()) {
                sb.append("not in the candidate: ").append(String.join(", ", missing));
                if (firstOver != null || routing != null && !routing.equal()) sb.append("; ");
            }
            if (firstOver != null) {
                sb.append(describe(firstOver)).append(" (first stage over budget)");
                if (worst != firstOver) sb.append("; worst ").append(describe(worst));
            }
            if (routing != null && !routing.equal()) {
                if (firstOver != null) sb.append("; ");
                sb.append("routing differs on ").append(routing.tokensDiffering()).append('/').append(routing.tokens()).append(" tokens (").append(routing.first()).append(')');
                if (!routing.nearTies().isEmpty()) {
                    sb.append(String.format(Locale.ROOT, "; %d of them at reference near-ties (score gap <= %.3g): ", routing.nearTies().size(), routing.tolerance()))
                            .append(String.join(" | ", routing.nearTies()));
                    if (routing.onlyNearTies()) sb.append("; stages compared with the reference's routing forced");
                }
            }
            msg = sb.toString();
        }
        return new LayerReport(layer, kind, metrics, routing, missing, f, msg, seconds);
    }

    static String describe(StageMetric m) {
        return String.format(Locale.ROOT, "%s %.3gx budget (max|diff| %.3g, max|ref| %.3g, budget %.3g, %s)", m.stage(), m.ratioToBudget(), m.maxAbsDiff(),
                m.maxAbsRef(), m.budget(), m.finiteCounts());
    }

    // ------------------------------------------------------------------ expert sweep

    /** The dump's expert sweep (docs/formats.md §7.10); a dump without a complete one is a {@link Finding#REFERENCE_MISMATCH}. */
    public synchronized ExpertSweep expertSweep() {
        if (sweep == null) sweep = ExpertSweep.of(dump);
        return sweep;
    }

    /** The MoE layers among {@code selection}. */
    public List<Integer> moeLayers(List<Integer> selection) {
        return selection.stream().filter(l -> dump.layer(l).mlp().equals("moe")).toList();
    }

    /**
     * Every routed expert of MoE layer {@code i} on the dump's probes, through this conformance's forward (its
     * expert source: resident, or the expert cache under a memory plan). Never throws for an expert's own faults.
     */
    public ExpertLayerReport experts(int i) {
        ReferenceDump.LayerInfo info = dump.layer(i);
        if (!info.mlp().equals("moe")) throw new IllegalArgumentException("layer " + i + " is dense: it has no routed experts");
        if (candidate != null) throw new ConformException(Finding.MISSING_STAGE, "a candidate dump holds no expert outputs: the expert sweep runs k3j's forward on a model");
        requireModel();
        return expertSweep().layer(forward, i, info.kind());
    }

    /** Experts {@code from}..{@code to}-1 of MoE layer {@code i}: a shard's part of the sweep. */
    public ExpertSweep.Range experts(int i, int from, int to) {
        ReferenceDump.LayerInfo info = dump.layer(i);
        if (!info.mlp().equals("moe")) throw new IllegalArgumentException("layer " + i + " is dense: it has no routed experts");
        if (candidate != null) throw new ConformException(Finding.MISSING_STAGE, "a candidate dump holds no expert outputs: the expert sweep runs k3j's forward on a model");
        requireModel();
        return expertSweep().range(forward, i, info.kind(), from, to);
    }

    // ------------------------------------------------------------------ logits

    /**
     * Logits at EVERY position against the dump's teacher-forcing logits. {@code incremental}: prefill the
     * prompt in one step, then feed the remaining ids one at a time through the KV cache and carried KDA
     * state; else one full forward over all ids.
     */
    public LogitParity.Result teacherForcing(boolean incremental) {
        return compareLogits(incremental ? "incremental" : "full recompute", engineLogits(incremental));
    }

    /**
     * The engine's [T][V] logits for the dump's ids (see {@link #teacherForcing(boolean)}); a candidate's own
     * ({@link Finding#MISSING_STAGE} when it holds none for that mode).
     */
    public float[] engineLogits(boolean incremental) {
        if (candidate != null) {
            float[] got = candidate.logits(incremental);
            if (got != null) return got;
            String note = candidate.logitsNote();
            throw new ConformException(Finding.MISSING_STAGE, "the candidate " + candidate.source() + " holds no " + CandidateDump.logitsKey(incremental)
                    + (note.isEmpty() ? "" : " (" + note + ")"));
        }
        requireModel();
        int v = config.vocabSize();
        if (!incremental) return forward.full(ids, true, null).logits();
        int np = dump.promptIds().length;
        if (np < 1 || np > tokens) throw ReferenceDump.mismatch(dump.source() + ": prompt length " + np + " does not fit " + tokens + " ids");
        DecodeState st = forward.newState(tokens + 1);   // sized from the config: the layers may be streamed
        float[] got = new float[tokens * v];
        float[] pre = forward.step(Arrays.copyOf(ids, np), st, true, null).logits();
        System.arraycopy(pre, 0, got, 0, np * v);
        for (int t = np; t < tokens; t++) System.arraycopy(forward.step(new int[] {ids[t]}, st, true, null).logits(), 0, got, t * v, v);
        return got;
    }

    /** Engine logits [T][V] against the dump's. */
    public LogitParity.Result compareLogits(String mode, float[] engine) {
        return LogitParity.compare(mode, engine, dump.f32("logits"), ids, dump.promptIds().length, dump.shape("logits")[1], budget);
    }

    /** Greedy generation (incremental) from the prompt against the dump's greedy ids; a candidate's own greedy ids when judging one. */
    public LogitParity.Greedy greedy() {
        if (candidate != null) return candidateGreedy();
        requireModel();
        int[] prompt = dump.promptIds(), want = dump.generatedIds();
        Generation g = Generation.greedy(forward, prompt, want.length, true);
        return greedy(g.generated(), g.stepLogits());
    }

    private LogitParity.Greedy candidateGreedy() {
        int[] got = candidate.greedyIds();
        if (got == null) throw new ConformException(Finding.MISSING_STAGE, "the candidate " + candidate.source() + " holds no greedy_ids");
        int[] prompt = dump.promptIds(), want = dump.generatedIds();
        float[] logits = candidate.logits(true) != null ? candidate.logits(true) : candidate.logits(false);
        int v = config.vocabSize();
        List<float[]> steps = new ArrayList<>();
        // the teacher-forced rows that produced the greedy ids stand for the engine's step logits (equal while the ids agree)
        for (int g = 0; logits != null && g < want.length && (prompt.length + g) * v <= logits.length; g++) {
            steps.add(Arrays.copyOfRange(logits, (prompt.length - 1 + g) * v, (prompt.length + g) * v));
        }
        return greedy(got, steps);
    }

    private LogitParity.Greedy greedy(int[] got, List<float[]> steps) {
        return LogitParity.greedy(dump, got, steps);
    }

    private void requireModel() {
        if (candidate != null) throw new ConformException(Finding.MISSING_STAGE, "a candidate dump is judged from its own arrays; nothing of k3j runs");
        if (forward == null) throw new ConformException(Finding.MISSING_TENSOR, firstLine(bindFailure.getMessage()));
    }

    private static String firstLine(String s) {
        int nl = s.indexOf('\n');
        return nl < 0 ? s : s.substring(0, nl);
    }

    private static double secs(long t0) {
        return (System.nanoTime() - t0) / 1e9;
    }

    @Override
    public void close() {
        if (assembly != null) assembly.close();
        if (prefixAssembly != null) prefixAssembly.close();
    }
}
