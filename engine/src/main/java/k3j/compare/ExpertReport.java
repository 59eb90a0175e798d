package k3j.compare;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.verdict.Finding;

/**
 * One routed expert judged by the expert sweep ({@link ExpertSweep}): its worst ratio to budget per part
 * (w1, w3, w2, out; over the probes), the verdict, and, when it fails, a message naming the layer, the expert
 * and the parts over budget. {@code ratios} is empty when the expert could not run. {@code allZero}: every
 * packed code the engine read is +0 (a fixture's sparse hole), so its parts are exactly 0 and the kernels did
 * not run; it is still compared against the reference's sketch.
 */
public record ExpertReport(int layer, int expert, double[] ratios, boolean allZero, Finding finding, String message) {
    static ExpertReport of(int layer, int expert, double[] ratios, boolean allZero) {
        double worst = 0;
        for (double r : ratios) worst = Math.max(worst, r);
        Finding f = Finding.ofRatio(worst);
        ExpertReport r = new ExpertReport(layer, expert, ratios.clone(), allZero, f, "");
        return f == Finding.CONFORMS ? r : new ExpertReport(layer, expert, ratios.clone(), allZero, f, f.tag() + " " + r.describe());
    }

    static ExpertReport notRun(int layer, int expert, Finding f, String why) {
        return new ExpertReport(layer, expert, new double[0], false, f, f.tag() + " L" + layer + " expert " + expert + ": " + why);
    }

    public boolean conforms() {
        return finding == Finding.CONFORMS;
    }

    public boolean ran() {
        return ratios.length == ExpertSweep.PARTS.size();
    }

    public double worst() {
        if (!ran()) return Double.POSITIVE_INFINITY;
        double w = 0;
        for (double r : ratios) w = Math.max(w, r);
        return w;
    }

    /** The parts over budget: "w1", "w3", ... ("out" alone: the activation or the combination, not one matrix). */
    public List<String> failingParts() {
        List<String> f = new ArrayList<>();
        for (int j = 0; j < ratios.length; j++) if (!(ratios[j] <= 1.0)) f.add(ExpertSweep.PARTS.get(j));
        return f;
    }

    /** The projections (w1, w2, w3) whose own probe fails: what a reader should look at. */
    public List<String> failingProjections() {
        return failingParts().stream().filter(p -> !p.equals("out")).sorted().toList();
    }

    public Map<String, Double> partRatios() {
        Map<String, Double> m = new LinkedHashMap<>();
        for (int j = 0; j < ratios.length; j++) m.put(ExpertSweep.PARTS.get(j), ratios[j]);
        return m;
    }

    /** "L38 expert 6: w1, w3 (w1 5.2e+03x, w3 4.9e+03x, w2 0.01x, out 812x budget)". */
    public String describe() {
        StringBuilder sb = new StringBuilder("L").append(layer).append(" expert ").append(expert).append(": ");
        List<String> proj = failingProjections();
        sb.append(proj.isEmpty() ? (conforms() ? "conforms" : "out only") : String.join(", ", proj));
        sb.append(" (");
        for (int j = 0; j < ratios.length; j++) sb.append(j == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%s %.3gx", ExpertSweep.PARTS.get(j), ratios[j]));
        return sb.append(" budget)").toString();
    }
}
