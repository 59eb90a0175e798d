package k3j.compare;

import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * The expert sweep of one MoE layer: every expert's {@link ExpertReport}, how many of the layer's experts ran
 * and were compared ({@code checked} of {@code total}), and the layer's verdict — the worst expert's, and a
 * failure when any expert could not be checked.
 */
public record ExpertLayerReport(int layer, String kind, int checked, int total, List<ExpertReport> experts, Finding finding, String message, double seconds) {
    public ExpertLayerReport {
        experts = List.copyOf(experts);
    }

    public static ExpertLayerReport of(int layer, String kind, int total, List<ExpertReport> experts, double seconds) {
        int checked = (int) experts.stream().filter(ExpertReport::ran).count();
        List<ExpertReport> bad = experts.stream().filter(e -> !e.conforms()).sorted(Comparator.comparingDouble(ExpertReport::worst).reversed()).toList();
        Finding f = Finding.CONFORMS;
        for (ExpertReport e : bad) if (e.finding().ordinal() > f.ordinal()) f = e.finding();
        String msg = "";
        if (!bad.isEmpty()) {
            msg = f.tag() + " L" + layer + " " + kind + ": " + bad.size() + " of " + total + " experts fail: "
                    + String.join("; ", bad.stream().limit(4).map(e -> e.message().substring(e.finding().tag().length() + 1)).toList())
                    + (bad.size() > 4 ? "; ..." : "");
        } else if (checked != total) {
            f = Finding.MISSING_TENSOR;
            msg = f.tag() + " L" + layer + " " + kind + ": experts checked: " + checked + " of " + total;
        }
        return new ExpertLayerReport(layer, kind, checked, total, experts, f, msg, seconds);
    }

    public boolean conforms() {
        return finding == Finding.CONFORMS;
    }

    /** "experts checked: 7 of 7", with "(860 all-zero)" when some are a fixture's sparse holes. */
    public String coverage() {
        long zero = experts.stream().filter(ExpertReport::allZero).count();
        return "experts checked: " + checked + " of " + total + (zero == 0 ? "" : " (" + zero + " all-zero)");
    }

    /** The {@code n} experts with the largest worst-part ratio, worst first. */
    public List<ExpertReport> worst(int n) {
        return experts.stream().sorted(Comparator.comparingDouble(ExpertReport::worst).reversed()).limit(n).toList();
    }

    /** The experts that do not conform, worst first: bisect and the report start with the strongest evidence. */
    public List<ExpertReport> failing() {
        return experts.stream().filter(e -> !e.conforms()).sorted(Comparator.comparingDouble(ExpertReport::worst).reversed()).toList();
    }

    public double worstRatioToBudget() {
        return experts.stream().mapToDouble(ExpertReport::worst).max().orElse(Double.POSITIVE_INFINITY);
    }

    /** "L38 KDA   PASS  experts checked: 7 of 7  worst 0.02x budget (expert 3)  0.1 s". */
    public String line() {
        ExpertReport w = worst(1).stream().findFirst().orElse(null);
        String worst = w == null ? "no expert" : String.format(Locale.ROOT, "worst %.3gx budget (expert %d)", w.worst(), w.expert());
        return String.format(Locale.ROOT, "%-12s %s  %s  %s  %.1f s%s", "L" + layer + " " + kind, conforms() ? "PASS" : "FAIL", coverage(), worst, seconds,
                conforms() ? "" : "   " + message);
    }

    /** A swept MoE layer (every expert of it): a pass, or a failure naming its failing experts. */
    public Invariants.Item item() {
        return conforms() ? Invariants.Item.pass("experts of L" + layer) : Invariants.Item.fail("experts of L" + layer, line());
    }
}
