package k3j.cli;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;
import k3j.api.Conform;
import k3j.api.ConformReport;
import k3j.api.internal.ApiInternals;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;

/** {@code k3 conform --experts}: the expert sweep's lines as it runs (its counts are not the decision: the verdict follows). */
final class ConformSweep {
    private ConformSweep() {}

    /** The expert sweep of the selected MoE layers: one line per layer, every failing expert named; returns every layer's report. */
    static List<ConformReport.Experts> layers(Conform judge, List<Integer> sel, PrintWriter out) {
        out.println();
        out.println("===== EXPERT SWEEP (every routed expert on the dump's probes) =====");
        out.println(ApiInternals.get().conformance(judge).expertSweep().describe());
        long t0 = System.nanoTime();
        int[] checked = {0}, total = {0};
        List<ConformReport.Experts> rs = judge.experts(sel, r -> {
            out.println(r.line());
            for (String e : r.failing()) out.println("    " + e);
            out.flush();
            checked[0] += r.checked();
            total[0] += r.total();
        });
        int failed = (int) rs.stream().filter(r -> !r.conforms()).count();
        out.println(k3j.fleet.Summary.expertsLine(rs.size(), failed, checked[0], total[0], (System.nanoTime() - t0) / 1e9));
        return rs;
    }

    /** A shard's expert ranges of the sweep: one line per range, every failing expert named. */
    static List<k3j.compare.ExpertSweep.Range> ranges(Conformance c, List<k3j.fleet.WorkPlan.ExpertRange> ranges, PrintWriter out) {
        out.println();
        out.println("===== EXPERT SWEEP (this shard's expert ranges on the dump's probes) =====");
        out.println(c.expertSweep().describe());
        List<k3j.compare.ExpertSweep.Range> rs = new ArrayList<>();
        for (var x : ranges) {
            var r = c.experts(x.layer(), x.from(), x.to());
            rs.add(r);
            var rep = ExpertLayerReport.of(r.layer(), r.kind(), r.to() - r.from(), r.experts(), r.seconds());
            out.println(x.text() + "  " + rep.line());
            for (ExpertReport e : rep.failing()) out.println("    " + e.message());
            out.flush();
        }
        return rs;
    }
}
