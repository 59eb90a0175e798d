package k3j.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.LayerReport;
import k3j.compare.LogitParity;
import k3j.compare.Routing;
import k3j.compare.StageMetric;
import k3j.io.StrictJson;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * What one run (or one shard of it) judged, as a shard writes it and the merge reads it back (docs/formats.md §18.3):
 * every judged layer's report as the layer run made it (stage metrics, routing, missing stages: before the cross-layer
 * causes, which the merge reads from every layer together), the expert sweep's experts by (layer, expert range), and the
 * logit blocks and greedy generation with their decision items. Doubles keep every bit they were computed with.
 *
 * @param logits the elementwise logit blocks (full recompute, incremental) as printed; empty when this run holds no logit part
 * @param greedy greedy generation as printed, or null
 */
public record Judged(List<Layer> layers, String sweep, List<Experts> experts, List<Block> logits, Block greedy) {
    public Judged {
        layers = List.copyOf(layers);
        experts = List.copyOf(experts);
        logits = List.copyOf(logits);
    }

    /** One layer's report and whether it sits on an AttnRes block boundary (what {@link k3j.compare.Causes} groups by). */
    public record Layer(LayerReport report, boolean boundary) {
        public int layer() {
            return report.layer();
        }

        public String kind() {
            return report.kind();
        }

        public Finding finding() {
            return report.finding();
        }

        public String line() {
            return report.line();
        }

        public double seconds() {
            return report.seconds();
        }

        public String firstDivergence() {
            return report.firstDivergence();
        }

        public double worstRatioToBudget() {
            return report.worstRatioToBudget();
        }

        public boolean conforms() {
            return report.conforms();
        }

        public String name() {
            return report.name();
        }
    }

    /**
     * The experts {@code from} (inclusive) to {@code to} (exclusive) of one MoE layer of {@code total}: the whole layer
     * in a one-machine run, an expert range in a shard.
     */
    public record Experts(int layer, String kind, int total, int from, int to, List<ExpertReport> experts, double seconds) {
        public Experts {
            experts = List.copyOf(experts);
            if (from < 0 || to > total || from > to || experts.size() != to - from) {
                throw new IllegalArgumentException("L" + layer + " experts " + from + ".." + to + " of " + total + " with " + experts.size() + " reports");
            }
            for (int i = 0; i < experts.size(); i++) {
                if (experts.get(i).expert() != from + i || experts.get(i).layer() != layer) throw new IllegalArgumentException("L" + layer + " experts out of order at " + (from + i));
            }
        }

        public static Experts of(ExpertLayerReport r) {
            return new Experts(r.layer(), r.kind(), r.total(), 0, r.total(), r.experts(), r.seconds());
        }

        public boolean whole() {
            return from == 0 && to == total;
        }

        /** The layer's report over these experts (a part of a layer is judged whole only once the merge joins its ranges). */
        public ExpertLayerReport report() {
            return ExpertLayerReport.of(layer, kind, total, experts, seconds);
        }

        /** "L5:0-191". */
        public String range() {
            return "L" + layer + ":" + from + "-" + (to - 1);
        }
    }

    /** A printed check block (a logit comparison, greedy generation) and its item of the decision ({@link Invariants#decide}). */
    public record Block(String name, String text, Invariants.Item item) {
        public boolean conforms() {
            return item.status() == Invariants.Status.PASS;
        }
    }

    /** A logit comparison's block ({@code missing}: why there is none, when {@code r} is null). */
    public static Block logits(k3j.compare.LogitParity.Result r, String missing) {
        if (r == null) return new Block("logits", "===== ELEMENTWISE LOGIT COMPARISON =====\n" + missing + "\n", LogitParity.logitsItem(null, missing));
        return new Block("logits " + r.mode(), "===== ELEMENTWISE LOGIT COMPARISON (" + r.mode() + ") =====\n" + r.text(), LogitParity.logitsItem(r, null));
    }

    /** Greedy generation's block ({@code missing}: why there is none, when {@code g} is null). */
    public static Block greedy(k3j.compare.LogitParity.Greedy g, String missing) {
        return new Block("greedy", "===== GREEDY GENERATION (incremental) =====\n" + (g == null ? missing + "\n" : g.text()), LogitParity.greedyItem(g, missing));
    }

    /** The layers that do not conform, in layer order. */
    public List<Layer> failing() {
        return layers.stream().filter(l -> !l.conforms()).toList();
    }

    // ---------------------------------------------------------------------------------------------- JSON

    /** The layers array of --json (docs/formats.md §15, §18.3). */
    public static void putLayers(ArrayNode arr, List<Layer> layers) {
        for (Layer l : layers) summary(arr.addObject(), l.report());
    }

    private static void summary(ObjectNode o, LayerReport r) {
        o.put("layer", r.layer());
        o.put("kind", r.kind());
        o.put("finding", r.finding().name());
        o.put("message", r.message());
        o.put("seconds", r.seconds());
        o.put("line", r.line());
        if (r.firstDivergence() != null) o.put("first_divergence", r.firstDivergence());
        o.put("worst_ratio_to_budget", r.worstRatioToBudget());
        ObjectNode ratios = o.putObject("ratios_to_budget");
        r.ratios().forEach(ratios::put);
        ObjectNode diffs = o.putObject("max_abs_diff");
        for (StageMetric m : r.stages()) diffs.put(m.stage(), m.maxAbsDiff());
        if (r.routing() != null) o.put("routing_tokens_differing", r.routing().tokensDiffering());
    }

    /** This run's results as a shard writes them: each layer's summary plus what rebuilds its report. */
    public ObjectNode json() {
        ObjectNode root = StrictJson.MAPPER.createObjectNode();
        ArrayNode ls = root.putArray("layers");
        for (Layer l : layers) {
            ObjectNode o = ls.addObject();
            summary(o, l.report());
            o.put("boundary", l.boundary());
            ArrayNode st = o.putArray("stages");
            for (StageMetric m : l.report().stages()) {
                ObjectNode s = st.addObject();
                s.put("stage", m.stage());
                s.put("width", m.width());
                s.put("max_abs_diff", m.maxAbsDiff());
                s.put("max_abs_ref", m.maxAbsRef());
                s.put("mean_abs_diff", m.meanAbsDiff());
                s.put("ratio", m.ratio());
                s.put("budget", m.budget());
                s.put("elements", m.elements());
                s.put("ref_finite", m.refFinite());
                s.put("engine_finite", m.engineFinite());
                s.put("correlation", m.correlation());
            }
            Routing rt = l.report().routing();
            if (rt != null) {
                ObjectNode r = o.putObject("routing");
                r.put("tokens", rt.tokens());
                r.put("top_k", rt.topK());
                r.put("tokens_differing", rt.tokensDiffering());
                rt.nearTies().forEach(r.putArray("near_ties")::add);
                if (rt.first() != null) r.put("first", rt.first());
                r.put("tolerance", rt.tolerance());
            }
            l.report().missing().forEach(o.putArray("missing")::add);
        }
        if (sweep != null) root.put("sweep", sweep);
        ArrayNode ex = root.putArray("experts");
        for (Experts e : experts) {
            ObjectNode o = ex.addObject();
            o.put("layer", e.layer());
            o.put("kind", e.kind());
            o.put("total", e.total());
            o.put("from", e.from());
            o.put("to", e.to());
            o.put("seconds", e.seconds());
            ArrayNode each = o.putArray("experts");
            for (ExpertReport r : e.experts()) {
                ObjectNode x = each.addObject();
                x.put("expert", r.expert());
                for (double v : r.ratios()) x.withArray("ratios").add(v);
                if (r.ratios().length == 0) x.putArray("ratios");
                x.put("all_zero", r.allZero());
                x.put("finding", r.finding().name());
                x.put("message", r.message());
            }
        }
        ArrayNode lg = root.putArray("logits");
        for (Block b : logits) block(lg.addObject(), b);
        if (greedy != null) block(root.putObject("greedy"), greedy);
        return root;
    }

    private static void block(ObjectNode o, Block b) {
        o.put("name", b.name());
        o.put("text", b.text());
        o.put("conforms", b.conforms());
        o.put("item", b.item().what());
        o.put("status", b.item().status().name());
        o.put("why", b.item().why());
    }

    private static final Function<String, RuntimeException> BAD = IllegalArgumentException::new;

    /** Reads {@link #json()} back; a missing or mistyped field is an IllegalArgumentException naming {@code where} and the key. */
    public static Judged read(JsonNode root, String where) {
        List<Layer> layers = new ArrayList<>();
        for (JsonNode o : array(root, "layers", where)) {
            String at = where + " layer " + o.path("layer").asText("?");
            List<StageMetric> stages = new ArrayList<>();
            for (JsonNode s : array(o, "stages", at)) {
                String st = at + " stage " + s.path("stage").asText("?");
                stages.add(new StageMetric(StrictJson.text(s, "stage", st, BAD), int32(s, "width", st), number(s, "max_abs_diff", st), number(s, "max_abs_ref", st),
                        number(s, "mean_abs_diff", st), number(s, "ratio", st), number(s, "budget", st), int32(s, "elements", st), int32(s, "ref_finite", st),
                        int32(s, "engine_finite", st), number(s, "correlation", st)));
            }
            Routing routing = null;
            JsonNode r = o.get("routing");
            if (r != null) {
                List<String> ties = new ArrayList<>();
                for (JsonNode t : array(r, "near_ties", at + " routing")) ties.add(t.asText());
                JsonNode first = r.get("first");
                routing = new Routing(int32(r, "tokens", at), int32(r, "top_k", at), int32(r, "tokens_differing", at), ties, first == null ? null : first.asText(),
                        number(r, "tolerance", at));
            }
            List<String> missing = new ArrayList<>();
            for (JsonNode m : array(o, "missing", at)) missing.add(m.asText());
            LayerReport rep = new LayerReport(int32(o, "layer", at), StrictJson.text(o, "kind", at, BAD), stages, routing, missing, finding(o, at),
                    StrictJson.text(o, "message", at, BAD), number(o, "seconds", at));
            if (!rep.line().equals(StrictJson.text(o, "line", at, BAD))) throw new IllegalArgumentException(at + ": its line is not the one its stages give");
            layers.add(new Layer(rep, StrictJson.bool(o, "boundary", at, BAD)));
        }
        List<Experts> experts = new ArrayList<>();
        for (JsonNode o : array(root, "experts", where)) {
            String at = where + " expert layer " + o.path("layer").asText("?");
            int layer = int32(o, "layer", at);
            List<ExpertReport> each = new ArrayList<>();
            for (JsonNode x : array(o, "experts", at)) {
                String xt = at + " expert " + x.path("expert").asText("?");
                JsonNode rs = array(x, "ratios", xt);
                double[] ratios = new double[rs.size()];
                for (int i = 0; i < ratios.length; i++) ratios[i] = number(rs.get(i), xt + " ratios");
                each.add(new ExpertReport(layer, int32(x, "expert", xt), ratios, StrictJson.bool(x, "all_zero", xt, BAD), finding(x, xt), StrictJson.text(x, "message", xt, BAD)));
            }
            experts.add(new Experts(layer, StrictJson.text(o, "kind", at, BAD), int32(o, "total", at), int32(o, "from", at), int32(o, "to", at), each, number(o, "seconds", at)));
        }
        List<Block> logits = new ArrayList<>();
        for (JsonNode o : array(root, "logits", where)) logits.add(block(o, where + " logits"));
        JsonNode g = root.get("greedy");
        JsonNode sweep = root.get("sweep");
        return new Judged(layers, sweep == null ? null : sweep.asText(), experts, logits, g == null ? null : block(g, where + " greedy"));
    }

    private static Finding finding(JsonNode o, String at) {
        String f = StrictJson.text(o, "finding", at, BAD);
        try {
            return Finding.valueOf(f);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(at + ": finding '" + f + "' is not one of " + List.of(Finding.values()));
        }
    }

    private static Block block(JsonNode o, String at) {
        String s = StrictJson.text(o, "status", at, BAD);
        Invariants.Status status;
        try {
            status = Invariants.Status.valueOf(s);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(at + ": status '" + s + "' is not one of " + List.of(Invariants.Status.values()));
        }
        Block b = new Block(StrictJson.text(o, "name", at, BAD), StrictJson.text(o, "text", at, BAD),
                new Invariants.Item(StrictJson.text(o, "item", at, BAD), status, StrictJson.text(o, "why", at, BAD)));
        if (b.conforms() != StrictJson.bool(o, "conforms", at, BAD)) throw new IllegalArgumentException(at + ": 'conforms' contradicts its status " + s);
        return b;
    }

    private static int int32(JsonNode o, String key, String where) {
        return StrictJson.int32(StrictJson.need(o, key, where, BAD), where + " " + key, BAD);
    }

    private static JsonNode array(JsonNode o, String key, String where) {
        JsonNode a = o.get(key);
        if (a == null || !a.isArray()) throw new IllegalArgumentException(where + ": no array '" + key + "'");
        return a;
    }

    private static double number(JsonNode o, String key, String where) {
        JsonNode v = o.get(key);
        if (v == null) throw new IllegalArgumentException(where + ": no '" + key + "'");
        return number(v, where + " " + key);
    }

    /** A ratio or a difference: a number, or the "NaN" / "Infinity" Jackson writes for a non-finite one. */
    private static double number(JsonNode v, String where) {
        if (v.isNumber()) return v.doubleValue();
        if (v.isTextual() && List.of("NaN", "Infinity", "-Infinity").contains(v.asText())) return Double.parseDouble(v.asText());
        throw new IllegalArgumentException(where + ": not a number");
    }
}
