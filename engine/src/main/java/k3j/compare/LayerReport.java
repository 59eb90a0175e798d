package k3j.compare;

import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.dump.Stage;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * One layer run alone from the dump's own inputs and compared stage by stage.
 *
 * @param kind     "KDA", "MLA" or "KDA dense" (mixer, and "dense" on a dense-MLP layer)
 * @param stages   every compared stage in order (the eight of docs/formats.md §7.2.2, then moe_weight on MoE layers);
 *                 empty when the layer could not run
 * @param routing  null on a dense layer, or when the candidate holds no routing
 * @param missing  the stages (and "moe_idx" / "moe_weight") a candidate dump does not hold, in comparison order
 * @param finding  the verdict; {@link Finding#MISSING_TENSOR} / {@link Finding#REFERENCE_MISMATCH} when it could not run
 * @param message  "" when it conforms, else a one-line reason starting with the finding's tag
 */
public record LayerReport(int layer, String kind, List<StageMetric> stages, Routing routing, List<String> missing, Finding finding, String message, double seconds) {
    public LayerReport {
        stages = List.copyOf(stages);
        missing = List.copyOf(missing);
    }

    /** A layer that did not run (nothing compared). */
    static LayerReport notRun(int layer, String kind, Finding finding, String message, double seconds) {
        return new LayerReport(layer, kind, List.of(), null, List.of(), finding, message, seconds);
    }

    /**
     * Where the layer first departs from the reference, in the order the stages are compared (the eight stages,
     * then the routing and moe_weight): the first stage over budget or missing, "moe_idx" for a routing
     * difference; null when it conforms or did not run.
     */
    public String firstDivergence() {
        List<String> order = new java.util.ArrayList<>(Stage.NAMES);
        order.add("moe_idx");
        order.add(Stage.MOE_WEIGHT);
        for (String name : order) {
            if (missing.contains(name)) return name;
            if (name.equals("moe_idx")) {
                if (routing != null && !routing.equal()) return name;
                continue;
            }
            for (StageMetric m : stages) if (m.stage().equals(name) && !(m.ratioToBudget() <= 1.0)) return name;
        }
        return null;
    }

    /** A pass: conforms, or conforms with the reference's routing after near-ties only ({@link Finding#NEAR_TIE}). */
    public boolean conforms() {
        return finding.passes();
    }

    /** One short line: "L37 MLA: conforms", or "L4 KDA: [binding error] first at attn_out, worst stage 3.23e+05x its budget" (the message has the rest). */
    @Override
    public String toString() {
        if (finding == Finding.CONFORMS) return name() + ": conforms";
        String first = firstDivergence();
        return name() + ": " + finding.tag() + (first != null ? " first at " + first : "")
                + (stages.isEmpty() ? "" : String.format(Locale.ROOT, ", worst stage %.3gx its budget", worstRatioToBudget()));
    }

    /** "L37 MLA". */
    public String name() {
        return "L" + layer + " " + kind;
    }

    /** The stage with the largest ratio to budget (null when none ran). */
    public StageMetric worst() {
        return stages.stream().max(Comparator.comparingDouble(StageMetric::ratioToBudget)).orElse(null);
    }

    public double worstRatioToBudget() {
        StageMetric w = worst();
        return w == null ? Double.POSITIVE_INFINITY : w.ratioToBudget();
    }

    /** "finite ref 2800/2800, engine 2800/2800": over every compared stage. */
    public String finiteCounts() {
        long n = 0, ref = 0, eng = 0;
        for (StageMetric m : stages) {
            n += m.elements();
            ref += m.refFinite();
            eng += m.engineFinite();
        }
        return "finite ref " + ref + "/" + n + ", engine " + eng + "/" + n;
    }

    /** stage → ratio to budget. */
    public Map<String, Double> ratios() {
        Map<String, Double> m = new LinkedHashMap<>();
        for (StageMetric s : stages) m.put(s.stage(), s.ratioToBudget());
        return m;
    }

    /**
     * The line printed as the layer is judged, before every selected layer is: a layer over budget alone knows only its
     * band, not its cause (docs/semantics.md §10.10), so its category tag reads {@code [over budget]} until the causes
     * are read from every layer together ({@link Causes#classify}); the classified layer's {@link #line()} then names it.
     */
    public String progressLine() {
        if (finding != Finding.ROUNDING_DRIFT && finding != Finding.BINDING_ERROR || !message.startsWith(finding.tag())) return line();
        return new LayerReport(layer, kind, stages, routing, missing, finding, "[over budget]" + message.substring(finding.tag().length()), seconds).line();
    }

    /** "L37 MLA   PASS   9 stages  worst 0.021x budget (attn_out)   0.4 s" — one line per layer, as the C engine's conformance tool prints it. */
    public String line() {
        StageMetric w = worst();
        String verdict = conforms() ? "PASS" : "FAIL";
        String worst = w == null ? "not run" : String.format(Locale.ROOT, "worst %.3gx budget (%s)  %s", w.ratioToBudget(), w.stage(), finiteCounts());
        return String.format(Locale.ROOT, "%-12s %s  %d stages  %s  %.1f s%s", name(), verdict, stages.size(), worst, seconds,
                message.isEmpty() ? "" : "   " + message);
    }

    /** A float32 layer: a pass, a stage the candidate does not hold (not judged), a non-finite stage (refused), or a failure. */
    public Invariants.Item item() {
        if (conforms()) return Invariants.Item.pass(name());
        return switch (finding) {
            case MISSING_STAGE -> Invariants.Item.notJudged(name(), message);
            case NON_FINITE -> Invariants.Item.refused(name(), "refused (invariant 1): " + message);
            default -> Invariants.Item.fail(name(), message);
        };
    }
}
