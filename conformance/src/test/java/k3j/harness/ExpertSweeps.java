package k3j.harness;

import io.qameta.allure.Allure;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import k3j.bisect.Corruption;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertLoadException;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.ExpertSweep;
import k3j.dump.ReferenceDump;
import k3j.kernels.Workers;

/**
 * What the expert-sweep gates share (docs/formats.md §7.10): the mix-ups they plant in unrouted experts,
 * the experts a dump's prompt routes, a conformance whose experts come through a bounded expert cache, and a
 * layer sweep's evidence in the report.
 */
public final class ExpertSweeps {
    private ExpertSweeps() {}

    /** Experts {@code a} and {@code b} of {@code layer} exchanged, all six tensors. */
    public static List<Corruption> expertSwap(int layer, int a, int b) {
        List<Corruption> out = new ArrayList<>();
        for (String w : List.of("w1", "w2", "w3")) {
            for (String t : List.of("weight_packed", "weight_scale")) {
                out.add(new Corruption.Swap(layer, expert(a) + w + "." + t, expert(b) + w + "." + t));
            }
        }
        return out;
    }

    /** Expert {@code e}'s w1 and w3 exchanged (packed codes and scales). */
    public static List<Corruption> gateUpSwap(int layer, int e) {
        return List.of(new Corruption.Swap(layer, expert(e) + "w1.weight_packed", expert(e) + "w3.weight_packed"),
                new Corruption.Swap(layer, expert(e) + "w1.weight_scale", expert(e) + "w3.weight_scale"));
    }

    private static String expert(int e) {
        return "block_sparse_moe.experts." + e + ".";
    }

    /** The experts the dump's ids select in {@code layer} (any token). */
    public static TreeSet<Integer> routed(ReferenceDump dump, int layer) {
        TreeSet<Integer> s = new TreeSet<>();
        for (int e : dump.i32("layers." + layer + ".moe_idx")) s.add(e);
        return s;
    }

    /** A conformance whose layers are bound resident (mapped) and whose routed experts all come through {@code cache}. */
    public record Cached(Conformance conformance, ExpertCache cache) implements AutoCloseable {
        @Override
        public void close() {
            conformance.close();
        }
    }

    /**
     * {@code model} against {@code dump} with the routed experts served by an expert cache of {@code bytes} (the
     * memory plan's path): a sweep reads every expert through it, evicting once the layer's experts do not fit.
     */
    public static Cached throughCache(Path model, ReferenceDump dump, Workers workers, long bytes) {
        ExpertCache[] cache = new ExpertCache[1];
        Conformance c = Conformance.open(model, dump, workers, a -> {
            a.model(true);
            try {
                cache[0] = a.cacheExperts(ExpertCache.Settings.of(bytes, a.binding().config().topK()), null, n -> {});
            } catch (ExpertLoadException e) {
                throw new AssertionError(e.getMessage(), e);
            }
        });
        return new Cached(c, cache[0]);
    }

    /** The worst experts a layer case lists (every failing one besides). */
    public static final int WORST = 5;

    /** One layer's sweep in the report: coverage line, verdict, worst and failing experts, the worst-experts table, the JSON. */
    public static void evidence(ExpertLayerReport r, ExpertSweep sweep, String diagnosis) {
        Evidence.parameter("coverage", r.coverage());
        Evidence.parameter("verdict", r.conforms() ? "conforms" : r.finding().tag());
        Evidence.parameter("worst expert", r.experts().isEmpty() ? "none" : describeWorst(r.worst(1).getFirst()));
        Evidence.parameter("failing experts", r.failing().isEmpty() ? "none"
                : String.join(", ", r.failing().stream().map(e -> e.expert() + " (" + String.join(", ", e.failingProjections()) + ")").toList()));
        Evidence.parameter("layer", r.layer());
        if (diagnosis != null) Evidence.parameter("bisect", diagnosis);
        Allure.description(description(r, sweep, diagnosis));
        Evidence.json("experts", json(r));
        Evidence.text("sweep", r.line());
    }

    static String describeWorst(ExpertReport e) {
        return "expert " + e.expert() + ", " + Evidence.format(e.worst()) + "x budget";
    }

    /** The verdict, the coverage line and the worst experts as a markdown table. */
    static String description(ExpertLayerReport r, ExpertSweep sweep, String diagnosis) {
        StringBuilder sb = new StringBuilder();
        sb.append("**").append(r.conforms() ? "Every expert conforms" : r.message()).append("**\n\n");
        sb.append("**").append(r.coverage()).append("** (every routed expert of the layer on ").append(sweep.probes())
                .append(" seeded probes, not only the ones the prompt routes)\n\n");
        if (diagnosis != null) sb.append("bisect: ").append(diagnosis).append("\n\n");
        sb.append("ratio = ||S x_engine - S x_ref|| / ||x_ref|| per probe and part, as a multiple of the part's budget; ").append(sweep.describe()).append(".\n\n");
        sb.append("| expert | verdict | failing projections |");
        for (String p : ExpertSweep.PARTS) sb.append(' ').append(p).append(" |");
        sb.append("\n|---:|---|---|");
        for (int i = 0; i < ExpertSweep.PARTS.size(); i++) sb.append("---:|");
        sb.append('\n');
        for (ExpertReport e : r.worst(Math.max(WORST, r.failing().size()))) {
            sb.append("| ").append(e.expert()).append(" | ").append(e.conforms() ? "conforms" : e.finding().tag()).append(" | ")
                    .append(e.failingProjections().isEmpty() ? "-" : String.join(", ", e.failingProjections())).append(" |");
            for (double v : e.ratios()) sb.append(' ').append(Evidence.format(v)).append(" |");
            sb.append('\n');
        }
        return sb.toString();
    }

    static Map<String, Object> json(ExpertLayerReport r) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("layer", r.layer());
        m.put("kind", r.kind());
        m.put("checked", r.checked());
        m.put("total", r.total());
        m.put("finding", r.finding().name());
        m.put("message", r.message());
        m.put("seconds", r.seconds());
        m.put("experts", r.experts().stream().map(e -> Map.of("expert", e.expert(), "finding", e.finding().name(), "ratios_to_budget", e.partRatios(),
                "failing_projections", e.failingProjections(), "all_zero", e.allZero())).toList());
        return m;
    }
}
