package k3j.bisect;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.ExpertSweep;
import k3j.compare.LayerReport;
import k3j.model.Forward;

/**
 * Names the first layer and stage that leave the reference, then diagnoses it: the failing layer is re-run
 * once per {@link Candidates candidate} that reaches the failing stage (it changes a tensor that stage
 * reads), and every candidate that brings that stage — and every stage before it — within budget is
 * reported. One layer per candidate, never the model.
 */
public final class Bisect {
    private Bisect() {}

    /** A candidate that makes the failing stage pass; {@code layerPasses}: and every stage of the layer, routing included. */
    public record Explanation(Candidate candidate, double stageRatio, boolean layerPasses, FaultStage stillFailing) {
        public String describe() {
            return candidate.describe() + (layerPasses ? "" : " (explains this stage; the layer still fails at " + stillFailing.key + ")");
        }
    }

    /**
     * The diagnosis of one failing layer: its first failing stage, how far over budget, the evidence and the family
     * order it gave, what explains it, and the candidates left untried (in the order they would have run):
     * {@code stoppedExplained} when the search stopped at a candidate that makes the whole layer conform, else
     * because its share of the budget was spent (or nothing was left).
     */
    public record Diagnosis(int layer, String kind, FaultStage stage, double ratio, int tried, List<Explanation> explanations, long nanos,
                            SearchBudget.Share budget, List<Candidate> untried, Triage evidence, List<Candidate> triedCandidates, boolean stoppedExplained) {
        public Diagnosis {
            explanations = List.copyOf(explanations);
            untried = List.copyOf(untried);
            triedCandidates = List.copyOf(triedCandidates);
        }

        public boolean explained() {
            return !explanations.isEmpty();
        }

        /** "L37 KDA attn_out 4.75e+04x budget: q_proj and k_proj are swapped", or "...: nothing explains it (...)". */
        public String summary() {
            String head = String.format(Locale.ROOT, "L%d %s %s %.3gx budget", layer, kind, stage.key, ratio);
            String left = untried.isEmpty() || stoppedExplained ? "" : " [" + notTried() + "]";
            if (explanations.isEmpty()) return head + ": nothing explains it (tried " + tried + " candidates: " + counts(triedCandidates) + ")" + left;
            return head + ": " + String.join("; or ", explanations.stream().map(Explanation::describe).toList()) + left;
        }

        /**
         * The diagnosis as plain data (maps, lists, strings, numbers) in the shape of docs/formats.md §16: what
         * {@code k3 bisect --json} writes per layer and what a report attaches.
         */
        public java.util.Map<String, Object> fields() {
            java.util.Map<String, Object> o = new java.util.LinkedHashMap<>();
            o.put("layer", layer);
            o.put("kind", kind);
            o.put("stage", stage.key);
            o.put("ratio_to_budget", ratio);
            o.put("explained", explained());
            o.put("explanations", explanations.stream().map(e -> java.util.Map.of("candidate", e.candidate().describe(), "family", e.candidate().family().plural,
                    "layer_conforms", e.layerPasses())).toList());
            o.put("summary", summary());
            java.util.Map<String, Object> ev = new java.util.LinkedHashMap<>();
            ev.put("text", evidence.describe());
            ev.put("failing_tokens", evidence.failingTokens().size());
            ev.put("tokens", evidence.tokens());
            ev.put("routing", evidence.routing());
            ev.put("routed_experts", evidence.routed().size());
            if (evidence.failingExperts() != null) ev.put("failing_experts", evidence.failingExperts());
            ev.put("family_order", evidence.order().stream().map(f -> f.plural).toList());
            ev.put("why", evidence.why());
            o.put("evidence", ev);
            o.put("tried", tried);
            o.put("tried_by_family", triedByFamily());
            o.put("untried", untried.size());
            o.put("stopped_explained", stoppedExplained);
            o.put("budget", budget.describe());
            o.put("seconds", nanos / 1e9);
            return o;
        }

        /** "2 same-shape swaps, 6 stored transposes": what was tried, by family. */
        public String triedByFamily() {
            return tried == 0 ? "none" : counts(triedCandidates);
        }

        /** "budget of 20 candidates reached after 20 tried; not tried: 27,980 (27,952 expert swaps, 28 expert nibble flips); next would have been: ...". */
        public String notTried() {
            if (untried.isEmpty()) return "every candidate that reaches " + stage.key + " was tried";
            String why = stoppedExplained ? "stopped at the first candidate that makes the whole layer conform"
                    : "budget of " + budget.describe() + " reached after " + tried + " tried";
            return String.format(Locale.ROOT, "%s; not tried: %,d (%s); next would have been: %s", why, untried.size(), counts(untried),
                    String.join("; ", untried.stream().limit(3).map(Candidate::describe).toList()));
        }

        private static String counts(List<Candidate> cs) {
            java.util.Map<Candidate.Family, Integer> kinds = new java.util.EnumMap<>(Candidate.Family.class);
            for (Candidate c : cs) kinds.merge(c.family(), 1, Integer::sum);
            List<String> parts = new ArrayList<>();
            kinds.forEach((k, n) -> parts.add(String.format(Locale.ROOT, "%,d %s", n, k.plural)));
            return String.join(", ", parts);
        }
    }

    /**
     * The diagnosis of one expert the expert sweep fails (the failing stage is the expert itself): which of its
     * mix-ups — nibble order, w1/w3 swapped, swapped with another expert — makes it (and, for a swap, the other
     * expert too) conform again.
     */
    public record ExpertDiagnosis(int layer, String kind, int expert, List<String> projections, double ratio, int tried, List<Candidate> explanations, long nanos) {
        public ExpertDiagnosis {
            projections = List.copyOf(projections);
            explanations = List.copyOf(explanations);
        }

        public boolean explained() {
            return !explanations.isEmpty();
        }

        /** "L38 KDA expert 2 (w1, w2, w3) 6.67e+04x budget: expert 2's nibble order is flipped (w1, w2, w3)". */
        public String summary() {
            String head = String.format(Locale.ROOT, "L%d %s expert %d (%s) %.3gx budget", layer, kind, expert,
                    projections.isEmpty() ? "out only" : String.join(", ", projections), ratio);
            if (explanations.isEmpty()) return head + ": nothing explains it (tried " + tried + " candidates: expert nibble flips, its w1/w3 swap, expert swaps)";
            return head + ": " + String.join("; or ", explanations.stream().map(Candidate::describe).toList());
        }
    }

    /**
     * Every checked layer and the diagnosis of every failing one, in layer order; with the expert sweep, every swept
     * MoE layer and, when every layer conforms but an expert does not, the diagnosis of the first failing expert.
     */
    public record Report(List<LayerReport> layers, List<Diagnosis> diagnoses, List<ExpertLayerReport> experts, ExpertDiagnosis expertDiagnosis) {
        public Report {
            layers = List.copyOf(layers);
            diagnoses = List.copyOf(diagnoses);
            experts = List.copyOf(experts);
        }

        public Report(List<LayerReport> layers, List<Diagnosis> diagnoses) {
            this(layers, diagnoses, List.of(), null);
        }

        /** The first failing layer's diagnosis, or null. */
        public Diagnosis diagnosis() {
            return diagnoses.isEmpty() ? null : diagnoses.getFirst();
        }

        public List<Integer> failing() {
            return layers.stream().filter(l -> !l.conforms()).map(LayerReport::layer).toList();
        }

        /** The MoE layers whose expert sweep fails. */
        public List<Integer> failingExperts() {
            return experts.stream().filter(e -> !e.conforms()).map(ExpertLayerReport::layer).toList();
        }

        /**
         * The one decision over what bisect judged: each layer, each swept MoE layer's experts, and the sweep not judged
         * when it was asked for and no MoE layer was selected. Its exit code is bisect's.
         */
        public k3j.verdict.Verdict verdict(boolean sweepPlanned) {
            List<k3j.verdict.Invariants.Item> items = new java.util.ArrayList<>();
            for (LayerReport l : layers) items.add(l.item());
            for (ExpertLayerReport e : experts) items.add(e.item());
            if (sweepPlanned && experts.isEmpty()) items.add(k3j.verdict.Invariants.Item.notJudged("the expert sweep", "no MoE layer among the selected layers"));
            return k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, items);
        }

        /** The failing layers' causes with their counts (docs/semantics.md §10.10): "cause [wrong constant or formula] x24". */
        public String causes() {
            java.util.Map<String, Long> by = new java.util.LinkedHashMap<>();
            for (LayerReport l : layers) if (!l.conforms()) by.merge(l.finding().tag(), 1L, Long::sum);
            return "cause " + String.join(", ", by.entrySet().stream().map(e -> e.getKey() + " x" + e.getValue()).toList());
        }

        /** The line a report's summary carries: every failing layer's stage and diagnosis (or expert), and how many fail. */
        public String summary() {
            List<Integer> f = failing(), fe = failingExperts();
            String sweep = experts.isEmpty() ? "" : fe.isEmpty()
                    ? "; every expert of " + experts.size() + " MoE layers conforms (" + experts.stream().mapToInt(ExpertLayerReport::checked).sum() + " checked)"
                    : " [the experts of " + fe.size() + " of " + experts.size() + " MoE layers fail: " + fe + "]";
            if (!diagnoses.isEmpty()) {
                return String.join("; ", diagnoses.stream().map(Diagnosis::summary).toList()) + " [" + f.size() + " of " + layers.size() + " layers fail: " + f + "; " + causes() + "]"
                        + (fe.isEmpty() ? "" : sweep);
            }
            if (!f.isEmpty()) return "first failing layer " + layers.stream().filter(l -> !l.conforms()).findFirst().orElseThrow().message();
            if (expertDiagnosis != null) return expertDiagnosis.summary() + " [all " + layers.size() + " layers conform on the prompt]" + sweep;
            if (!fe.isEmpty()) return "all " + layers.size() + " layers conform on the prompt, but " + experts.stream().filter(e -> !e.conforms()).findFirst().orElseThrow().message();
            return "all " + layers.size() + " layers conform" + sweep;
        }
    }

    /** Checks {@code layers} in order and diagnoses every failing one within the default budget. */
    public static Report run(LayerConformance conformance, LayerRunner runner, List<Integer> layers) {
        return run(conformance, runner, layers, false, SearchBudget.DEFAULT);
    }

    /**
     * {@link #run(LayerConformance, LayerRunner, List)}, and with {@code experts} the expert sweep of the selected
     * MoE layers; when every layer conforms, the first failing expert is the failing stage and is diagnosed.
     */
    public static Report run(LayerConformance conformance, LayerRunner runner, List<Integer> layers, boolean experts) {
        return run(conformance, runner, layers, experts, SearchBudget.DEFAULT);
    }

    /**
     * The same, every failing layer diagnosed in layer order under one {@code budget}, shared fairly: each layer gets
     * what is left divided by the layers still to diagnose ({@link SearchBudget#share}).
     */
    public static Report run(LayerConformance conformance, LayerRunner runner, List<Integer> layers, boolean experts, SearchBudget budget) {
        return run(conformance, runner, layers, experts, budget, d -> {});
    }

    /** The same, handing each layer's diagnosis to {@code diagnosed} as soon as it is made (a command prints it). */
    public static Report run(LayerConformance conformance, LayerRunner runner, List<Integer> layers, boolean experts, SearchBudget budget,
                             java.util.function.Consumer<Diagnosis> diagnosed) {
        List<LayerReport> checks = new ArrayList<>();
        for (int l : layers) checks.add(conformance.check(l));
        checks = k3j.compare.Causes.classify(checks, conformance.conformance().dump());
        List<LayerReport> failing = checks.stream().filter(c -> !c.conforms()).toList();
        List<Diagnosis> ds = new ArrayList<>();
        int tried = 0;
        long spent = 0;
        for (int i = 0; i < failing.size(); i++) {
            Diagnosis d = diagnose(conformance, runner, failing.get(i), budget.share(tried, spent, failing.size() - i));
            if (d == null) continue;
            tried += d.tried();
            spent += d.nanos();
            ds.add(d);
            diagnosed.accept(d);
        }
        if (!experts) return new Report(checks, ds);
        Conformance c = conformance.conformance();
        List<ExpertLayerReport> sweep = c.moeLayers(layers).stream().map(c::experts).toList();
        ExpertReport firstExpert = sweep.stream().flatMap(s -> s.failing().stream()).filter(ExpertReport::ran).findFirst().orElse(null);
        ExpertDiagnosis ed = failing.isEmpty() && firstExpert != null ? diagnose(c, runner, firstExpert) : null;
        return new Report(checks, ds, sweep, ed);
    }

    /** Re-runs the failing expert's probes once per candidate of {@link Candidates#ofExpert}. */
    public static ExpertDiagnosis diagnose(Conformance c, LayerRunner runner, ExpertReport failing) {
        long t0 = System.nanoTime();
        ExpertSweep sweep = c.expertSweep();
        ExpertSweep.Probes pr = sweep.probes(failing.layer());
        List<Candidate> found = new ArrayList<>();
        List<Candidate> cands = Candidates.ofExpert(failing.expert(), pr.experts());
        for (Candidate cand : cands) {
            try (java.lang.foreign.Arena scratch = java.lang.foreign.Arena.ofShared()) {
                Forward f = runner.forward(cand, scratch);
                boolean ok = sweep.expert(f, pr, failing.expert()).conforms();
                if (ok && cand instanceof Candidate.ExpertSwap s) ok = sweep.expert(f, pr, s.a() == failing.expert() ? s.b() : s.a()).conforms();
                if (ok) found.add(cand);
            }
        }
        return new ExpertDiagnosis(failing.layer(), c.dump().layer(failing.layer()).kind(), failing.expert(), failing.failingProjections(), failing.worst(),
                cands.size(), found, System.nanoTime() - t0);
    }

    /** The diagnosis line of one failing expert of an open conformance (for a report's summary), or null when it conforms or did not run. */
    public static String expertDiagnosisLine(Conformance c, ExpertReport failing, k3j.kernels.Workers workers) {
        if (failing.conforms() || !failing.ran() || c.model() == null) return null;
        try (LayerRunner runner = LayerRunner.of(c, workers)) {
            return diagnose(c, runner, failing).summary();
        }
    }

    /**
     * The diagnosis line of one failing layer of an open {@link k3j.compare.Conformance} (for a report's summary,
     * e.g. the checkpoint gate's failing-layer message): "L37 KDA attn_out 4.75e+04x budget: k_proj and q_proj
     * are swapped", or null when the layer conforms or did not run.
     */
    public static String diagnosisLine(k3j.compare.Conformance c, LayerReport failing, k3j.kernels.Workers workers) {
        Diagnosis d = diagnosis(c, failing, workers);
        return d == null ? null : d.summary();
    }

    /**
     * The diagnosis of one failing layer of an open conformance within the default budget (a report attaches its
     * {@link Diagnosis#fields()}), or null when the layer conforms or did not run.
     */
    public static Diagnosis diagnosis(k3j.compare.Conformance c, LayerReport failing, k3j.kernels.Workers workers) {
        if (failing.conforms() || c.model() == null) return null;
        try (LayerRunner runner = LayerRunner.of(c, workers)) {
            return diagnose(new LayerConformance(c), runner, failing);
        }
    }

    /**
     * Re-runs the failing layer once per candidate that reaches its first failing stage. Null when the layer
     * did not run at all (a missing tensor: the binder's message already names it) or no stage is over budget.
     */
    public static Diagnosis diagnose(LayerConformance conformance, LayerRunner runner, LayerReport failing) {
        return diagnose(conformance, runner, failing, SearchBudget.DEFAULT.whole());
    }

    /**
     * {@link #diagnose(LayerConformance, LayerRunner, LayerReport)} within {@code budget}: first the {@link Triage}
     * (the failing stage and tokens, routing, the routed experts on their sweep probes) orders the candidate families,
     * then the candidates run in that order ({@link Fit} order within a family) until one makes the whole layer
     * conform or the share is spent; the rest are listed as untried.
     */
    public static Diagnosis diagnose(LayerConformance conformance, LayerRunner runner, LayerReport failing, SearchBudget.Share budget) {
        if (failing.stages().isEmpty()) return null;
        FaultStage stage = FaultStage.firstFailing(failing);
        if (stage == null) return null;
        long t0 = System.nanoTime();
        int layer = failing.layer(), tried = 0;
        int[] routed = conformance.routedExperts(layer);
        List<Candidate> reaching = runner.candidates(layer, routed).stream().filter(c -> c.reaches(stage)).toList();
        k3j.dump.ReferenceDump dump = conformance.conformance().dump();
        double[] errors = Fit.tokenErrors(stage, failing, conformance.run(runner, layer), dump);
        boolean[] bad = new boolean[errors.length];
        for (int i = 0; i < bad.length; i++) bad[i] = !(errors[i] <= 1.0);
        boolean routedReach = reaching.stream().anyMatch(c -> c.family().routed);
        Triage evidence = Triage.of(conformance.conformance(), failing, stage, errors, routed, routedReach);
        String w = "layers." + layer + ".moe_weight";
        List<Candidate> ordered = evidence.order(Fit.order(reaching, bad, routed, dump.has(w) ? dump.f32(w) : null, errors));
        List<Explanation> found = new ArrayList<>();
        List<Candidate> untried = List.of();
        boolean stopped = false;
        for (int n = 0; n < ordered.size(); n++) {
            if (stopped || budget.exhausted(tried, System.nanoTime() - t0)) {
                untried = ordered.subList(n, ordered.size());
                break;
            }
            Candidate c = ordered.get(n);
            tried++;
            LayerReport with = conformance.check(runner, layer, c);
            FaultStage first = FaultStage.firstFailing(with);
            if (first == null || first.ordinal() > stage.ordinal()) found.add(new Explanation(c, stage.ratio(with), first == null, first));
            stopped = first == null;
        }
        return new Diagnosis(layer, failing.kind(), stage, stage.ratio(failing), tried, found, System.nanoTime() - t0, budget, untried, evidence,
                ordered.subList(0, tried), stopped);
    }
}
