package k3j.compare;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.dump.ReferenceDump;
import k3j.dump.Stage;
import k3j.model.LayerStages;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.VerdictLimits;

/**
 * A lossy candidate's layers graded instead of judged (docs/formats.md §9.6): per layer and stage the
 * NMSE = Σ(cand − ref)² / Σref² and the cosine of the two arrays, and the layer where the error grows most relative
 * to its input's error.
 *
 * <p>Every layer ran alone from the reference's own inputs (docs/formats.md §7.6), so a layer inherits nothing from the
 * layers before it: its error is what it adds. What a port's precision explains is read from the port itself: a
 * stage's <em>excess</em> is its NMSE over the median NMSE of the same stage in the layers of the same build (mixer,
 * MLP, AttnRes boundary). Its <em>growth</em> is its excess over its input stage's excess (at least 1), in the order
 * of computation (attn_in from the exact inputs, attn_norm from attn_in, … partial_out from mlp_out), so a stage that
 * only carries an error its input already had does not count; the stage that makes it does. The layer singled out is
 * the one holding the largest growth: a quantised layer sits near 1–10, a wrong binding in one layer far above.
 */
public record LossyLayers(List<Layer> layers, int worstLayer, String worstStage, double worstGrowth, List<String> refused) {
    public LossyLayers {
        layers = List.copyOf(layers);
        refused = List.copyOf(refused);
    }

    /**
     * One layer: per stage (the eight of docs/formats.md §7.2.2, in order) NMSE, cosine, excess and growth; NaN where the
     * candidate does not hold the stage; {@code note} says why a layer has none.
     */
    public record Layer(int layer, String kind, double[] nmse, double[] cosine, double[] excess, double[] growth, String note) {
        public double maxGrowth() {
            double g = 0;
            for (double x : growth) if (x > g) g = x;
            return g;
        }

        int maxGrowthStage() {
            int s = -1;
            for (int i = 0; i < growth.length; i++) if (growth[i] > (s < 0 ? 0 : growth[s])) s = i;
            return s;
        }
    }

    /** Grades every layer of {@code selection} of a conformance (a candidate's, or k3j's own forward). */
    public static LossyLayers of(Conformance c, List<Integer> selection) {
        ReferenceDump dump = c.dump();
        int n = Stage.NAMES.size();
        List<double[]> nmse = new ArrayList<>(), cos = new ArrayList<>();
        List<String> notes = new ArrayList<>(), groups = new ArrayList<>(), kinds = new ArrayList<>(), refused = new ArrayList<>();
        for (int i : selection) {
            ReferenceDump.LayerInfo info = dump.layer(i);
            double[] e = new double[n], k = new double[n];
            Arrays.fill(e, Double.NaN);
            Arrays.fill(k, Double.NaN);
            String note = "";
            switch (c.run(i)) {
                case LayerRun.Ran r -> {
                    LayerStages st = r.stages();
                    List<String> absent = new ArrayList<>();
                    for (int s = 0; s < n; s++) {
                        float[] got = Stage.values()[s].of(st);
                        if (got == null) {   // a stage the candidate does not hold: the layer is not judged, never graded on the rest
                            absent.add(Stage.NAMES.get(s));
                            continue;
                        }
                        float[] want = dump.f32("layers." + i + "." + Stage.NAMES.get(s));
                        String bad = got.length != want.length ? null : Invariants.implausible("L" + i + " " + Stage.NAMES.get(s), got, want, VerdictLimits.shipped());
                        if (bad != null) {   // invariant 1: never graded
                            refused.add(bad);
                            continue;
                        }
                        double[] m = nmseCosine(got, want);
                        e[s] = m[0];
                        k[s] = m[1];
                    }
                    if (!absent.isEmpty()) note = Finding.MISSING_STAGE.tag() + " the candidate holds no " + String.join(", ", absent);
                }
                case LayerRun.Failed f -> note = f.report().message();
            }
            nmse.add(e);
            cos.add(k);
            notes.add(note);
            kinds.add(info.kind());
            groups.add(info.mixer() + "/" + info.mlp() + "/" + info.boundary());
        }
        List<Layer> out = new ArrayList<>();
        int worst = -1, worstStage = -1;
        double worstGrowth = 0;
        for (int a = 0; a < selection.size(); a++) {
            double[] excess = new double[n], growth = new double[n];
            for (int s = 0; s < n; s++) {
                List<Double> same = new ArrayList<>();
                for (int b = 0; b < selection.size(); b++) if (groups.get(b).equals(groups.get(a)) && !Double.isNaN(nmse.get(b)[s])) same.add(nmse.get(b)[s]);
                double med = median(same);
                double x = nmse.get(a)[s];
                excess[s] = Double.isNaN(x) ? Double.NaN : x == 0 ? 0 : med > 0 ? x / med : Double.POSITIVE_INFINITY;
            }
            for (int s = 0; s < n; s++) {
                double in = s == 0 ? 1 : Double.isNaN(excess[s - 1]) ? 1 : Math.max(1, excess[s - 1]);
                growth[s] = excess[s] / in;
            }
            Layer l = new Layer(selection.get(a), kinds.get(a), nmse.get(a), cos.get(a), excess, growth, notes.get(a));
            out.add(l);
            int ms = l.maxGrowthStage();
            if (ms >= 0 && l.growth()[ms] > worstGrowth) {
                worstGrowth = l.growth()[ms];
                worst = l.layer();
                worstStage = ms;
            }
        }
        return new LossyLayers(out, worst, worstStage < 0 ? null : Stage.NAMES.get(worstStage), worstGrowth, refused);
    }

    /** {NMSE, cosine} of two arrays (NMSE infinite and cosine NaN when the reference is all zero and the candidate not). */
    static double[] nmseCosine(float[] got, float[] want) {
        if (got.length != want.length) return new double[] {Double.POSITIVE_INFINITY, Double.NaN};
        double se = 0, rr = 0, gg = 0, gr = 0;
        for (int j = 0; j < got.length; j++) {
            double g = got[j], r = want[j], d = g - r;
            se += d * d;
            rr += r * r;
            gg += g * g;
            gr += g * r;
        }
        double nmse = se == 0 ? 0 : rr == 0 ? Double.POSITIVE_INFINITY : se / rr;
        double cos = rr == 0 && gg == 0 ? 1 : gr / Math.sqrt(rr * gg);
        return new double[] {nmse, cos};
    }

    private static double median(List<Double> v) {
        if (v.isEmpty()) return Double.NaN;
        double[] a = v.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
    }

    /** The median over the graded layers of each layer's largest growth (what a port's precision makes a layer add). */
    public double medianGrowth() {
        return median(layers.stream().filter(l -> l.note().isEmpty()).map(Layer::maxGrowth).toList());
    }

    /**
     * Whether the largest growth stands out (docs/semantics.md §10.10): at least {@code lossy.outlier_factor}
     * (k3j/compare/causes.json) times the median layer's largest growth. A healthy port's layers all grow alike and name none.
     */
    public boolean outlier() {
        double med = medianGrowth();
        return worstLayer >= 0 && worstGrowth >= Causes.RULES.lossyOutlierFactor() * (med > 0 ? med : 1);
    }

    /** The line naming the layer singled out, or saying that none stands out. */
    public String worstLine() {
        if (!refused.isEmpty()) return "REFUSED (invariant 1): " + String.join("; ", refused);
        if (worstLayer < 0) return "LARGEST ERROR GROWTH: none (no stage to grade)";
        Layer l = layers.stream().filter(x -> x.layer() == worstLayer).findFirst().orElseThrow();
        int s = Stage.NAMES.indexOf(worstStage);
        if (!outlier()) {
            return String.format(Locale.ROOT, "LARGEST ERROR GROWTH: none stands out (the largest, L%d %s %s at %.3gx its input's excess, is under %.3gx the median layer's %.3gx)",
                    worstLayer, l.kind(), worstStage, worstGrowth, Causes.RULES.lossyOutlierFactor(), medianGrowth());
        }
        return String.format(Locale.ROOT, "LARGEST ERROR GROWTH: L%d %s %s: NMSE %.3g, %.3gx the median of its kind, %.3gx its input's excess (cosine %.6f);"
                        + " %.3gx the median layer's largest growth (an outlier at %.3gx or more)",
                worstLayer, l.kind(), worstStage, l.nmse()[s], l.excess()[s], worstGrowth, l.cosine()[s], worstGrowth / medianGrowth(), Causes.RULES.lossyOutlierFactor());
    }

    /** One line per layer: NMSE per stage, the lowest cosine, the largest growth and its stage. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "%-5s %-9s", "layer", "kind"));
        for (String s : Stage.NAMES) sb.append(String.format(Locale.ROOT, " %12s", s));
        sb.append(String.format(Locale.ROOT, " %10s %8s  %s%n", "min cos", "growth", "(stage)"));
        for (Layer l : layers) {
            sb.append(String.format(Locale.ROOT, "L%-4d %-9s", l.layer(), l.kind()));
            double minCos = Double.NaN;
            for (int s = 0; s < l.nmse().length; s++) {
                sb.append(String.format(Locale.ROOT, " %12.3e", l.nmse()[s]));
                if (!Double.isNaN(l.cosine()[s])) minCos = Double.isNaN(minCos) ? l.cosine()[s] : Math.min(minCos, l.cosine()[s]);
            }
            int ms = l.maxGrowthStage();
            sb.append(String.format(Locale.ROOT, " %10.6f %8.3g  %s%s%n", minCos, l.maxGrowth(), ms < 0 ? "" : Stage.NAMES.get(ms),
                    l.layer() == worstLayer ? "   <- largest growth" : l.note().isEmpty() ? "" : "   " + l.note()));
        }
        return sb.toString();
    }

    /** The whole table as plain data. */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("rule", "nmse = sum((cand-ref)^2)/sum(ref^2) per stage; excess = nmse / median nmse of the same stage over layers of the same mixer, mlp and boundary; "
                + "growth = excess / max(1, excess of the stage's input stage); the layer singled out holds the largest growth");
        m.put("stages", Stage.NAMES);
        m.put("worst_layer", worstLayer);
        m.put("worst_stage", worstStage);
        m.put("worst_growth", worstGrowth);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (Layer l : layers) {
            Map<String, Object> o = new LinkedHashMap<>();
            o.put("layer", l.layer());
            o.put("kind", l.kind());
            o.put("nmse", finite(l.nmse()));
            o.put("cosine", finite(l.cosine()));
            o.put("excess", finite(l.excess()));
            o.put("growth", finite(l.growth()));
            if (!l.note().isEmpty()) o.put("note", l.note());
            rows.add(o);
        }
        m.put("layers", rows);
        m.put("refused", refused);
        return m;
    }

    /** JSON has no NaN or infinity: null for a stage not held, the string "inf" for an infinite figure. */
    private static List<Object> finite(double[] v) {
        List<Object> out = new ArrayList<>();
        for (double x : v) out.add(Double.isNaN(x) ? null : Double.isInfinite(x) ? "inf" : (Object) x);
        return out;
    }

    /**
     * Invariant 4: a lossy grade's layer items. A layer the candidate could not give is not judged; a layer whose error
     * growth is past {@code growth_limit} carries a binding signature (one layer's stage far outside its kind) and fails.
     */
    public List<Invariants.Item> items(VerdictLimits limits) {
        List<Invariants.Item> items = new ArrayList<>();
        for (String r : refused) items.add(Invariants.Item.refused("layer stage", r));
        for (Layer l : layers) {
            String what = "L" + l.layer() + " " + l.kind();
            if (!l.note().isEmpty()) {
                items.add(Invariants.Item.notJudged(what, l.note()));
                continue;
            }
            boolean held = false;
            for (double x : l.nmse()) held |= !Double.isNaN(x);
            if (!held) {
                items.add(Invariants.Item.notJudged(what, "the candidate holds no stage of it"));
                continue;
            }
            double g = l.maxGrowth();
            if (!(g <= limits.growthLimit())) {
                items.add(Invariants.Item.fail(what, String.format(Locale.ROOT, "binding signature: error growth %.3g at %s, past the limit %.3g of a lossy port",
                        g, Stage.NAMES.get(Math.max(0, l.maxGrowthStage())), limits.growthLimit())));
            } else {
                items.add(Invariants.Item.pass(what));
            }
        }
        return items;
    }
}
