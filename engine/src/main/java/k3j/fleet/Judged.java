package k3j.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import k3j.api.ConformReport;
import k3j.conform.ExpertLayerReport;
import k3j.conform.ExpertReport;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.io.StrictJson;

/**
 * What one run (or one shard of it) judged, as a shard writes it and the merge reads it back: every judged layer, the
 * expert sweep's layers, the logit blocks and greedy generation (docs/formats.md §18.3). Ratios keep every bit of the
 * double they were computed as.
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

    /** One layer's verdict: what the one-line report, the summary and the JSON say of it. */
    public record Layer(int layer, String kind, Finding finding, String message, double seconds, String line, String firstDivergence,
                        double worstRatioToBudget, Map<String, Double> ratios, Map<String, Double> maxAbsDiff, Integer routingTokensDiffering) {
        public Layer {
            ratios = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(ratios));
            maxAbsDiff = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(maxAbsDiff));
        }

        public static Layer of(LayerReport r) {
            Map<String, Double> diffs = new LinkedHashMap<>();
            for (var m : r.stages()) diffs.put(m.stage(), m.maxAbsDiff());
            return new Layer(r.layer(), r.kind(), r.finding(), r.message(), r.seconds(), r.line(), r.firstDivergence(), r.worstRatioToBudget(), r.ratios(), diffs,
                    r.routing() != null ? r.routing().tokensDiffering() : null);
        }

        public boolean conforms() {
            return finding.passes();
        }

        public String name() {
            return "L" + layer + " " + kind;
        }
    }

    /** One MoE layer of the expert sweep: its line, its failing experts' messages and the counts. */
    public record Experts(int layer, String line, List<String> failing, boolean conforms, int checked, int total) {
        public Experts {
            failing = List.copyOf(failing);
        }

        public static Experts of(ExpertLayerReport r) {
            return new Experts(r.layer(), r.line(), r.failing().stream().map(ExpertReport::message).toList(), r.conforms(), r.checked(), r.total());
        }
    }

    /** A printed check block (a logit comparison, greedy generation) and whether it conforms. */
    public record Block(String name, String text, boolean conforms) {}

    public static Block logits(ConformReport.Logits l) {
        if (l.comparison() == null) return new Block("logits", "===== ELEMENTWISE LOGIT COMPARISON =====\n" + l.missing() + "\n", false);
        return new Block("logits " + l.comparison().mode(), "===== ELEMENTWISE LOGIT COMPARISON (" + l.comparison().mode() + ") =====\n" + l.text(), l.conforms());
    }

    public static Block greedy(ConformReport.Greedy g) {
        String head = "===== GREEDY GENERATION (incremental) =====\n";
        return new Block("greedy", head + g.text(), g.conforms());
    }

    /** The layers that do not conform, in layer order. */
    public List<Layer> failing() {
        return layers.stream().filter(l -> !l.conforms()).toList();
    }

    /** Every layer, swept expert layer, logit block and greedy generation conforms. */
    public boolean conforms() {
        return failing().isEmpty() && experts.stream().allMatch(Experts::conforms) && logits.stream().allMatch(Block::conforms) && (greedy == null || greedy.conforms());
    }

    // ---------------------------------------------------------------------------------------------- JSON

    /** The layers array of --json (docs/formats.md §18.3). */
    public static void putLayers(ArrayNode arr, List<Layer> layers) {
        for (Layer r : layers) {
            ObjectNode o = arr.addObject();
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
            r.maxAbsDiff().forEach(diffs::put);
            if (r.routingTokensDiffering() != null) o.put("routing_tokens_differing", r.routingTokensDiffering());
        }
    }

    /** This run's results as a shard writes them. */
    public ObjectNode json() {
        ObjectNode root = StrictJson.MAPPER.createObjectNode();
        putLayers(root.putArray("layers"), layers);
        if (sweep != null) root.put("sweep", sweep);
        ArrayNode ex = root.putArray("experts");
        for (Experts e : experts) {
            ObjectNode o = ex.addObject();
            o.put("layer", e.layer());
            o.put("line", e.line());
            e.failing().forEach(o.putArray("failing")::add);
            o.put("conforms", e.conforms());
            o.put("checked", e.checked());
            o.put("total", e.total());
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
    }

    /** Reads {@link #json()} back; a missing or mistyped field is an IllegalArgumentException naming {@code where} and the key. */
    public static Judged read(JsonNode root, String where) {
        java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
        List<Layer> layers = new ArrayList<>();
        for (JsonNode o : array(root, "layers", where)) {
            String at = where + " layer " + o.path("layer").asText("?");
            Finding f;
            try {
                f = Finding.valueOf(StrictJson.text(o, "finding", at, bad));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(at + ": finding '" + o.path("finding").asText() + "' is not one of " + List.of(Finding.values()));
            }
            JsonNode fd = o.get("first_divergence");
            JsonNode rd = o.get("routing_tokens_differing");
            layers.add(new Layer(StrictJson.int32(StrictJson.need(o, "layer", at, bad), at + " layer", bad), StrictJson.text(o, "kind", at, bad), f,
                    StrictJson.text(o, "message", at, bad), number(o, "seconds", at), StrictJson.text(o, "line", at, bad), fd == null ? null : fd.asText(),
                    number(o, "worst_ratio_to_budget", at), doubles(o, "ratios_to_budget", at), doubles(o, "max_abs_diff", at),
                    rd == null ? null : StrictJson.int32(rd, at + " routing_tokens_differing", bad)));
        }
        List<Experts> experts = new ArrayList<>();
        for (JsonNode o : array(root, "experts", where)) {
            String at = where + " expert layer " + o.path("layer").asText("?");
            List<String> failing = new ArrayList<>();
            for (JsonNode m : array(o, "failing", at)) failing.add(m.asText());
            experts.add(new Experts(StrictJson.int32(StrictJson.need(o, "layer", at, bad), at, bad), StrictJson.text(o, "line", at, bad), failing,
                    StrictJson.bool(o, "conforms", at, bad), StrictJson.int32(StrictJson.need(o, "checked", at, bad), at, bad),
                    StrictJson.int32(StrictJson.need(o, "total", at, bad), at, bad)));
        }
        List<Block> logits = new ArrayList<>();
        for (JsonNode o : array(root, "logits", where)) logits.add(block(o, where + " logits"));
        JsonNode g = root.get("greedy");
        JsonNode sweep = root.get("sweep");
        return new Judged(layers, sweep == null ? null : sweep.asText(), experts, logits, g == null ? null : block(g, where + " greedy"));
    }

    private static Block block(JsonNode o, String at) {
        java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
        return new Block(StrictJson.text(o, "name", at, bad), StrictJson.text(o, "text", at, bad), StrictJson.bool(o, "conforms", at, bad));
    }

    private static JsonNode array(JsonNode o, String key, String where) {
        JsonNode a = o.get(key);
        if (a == null || !a.isArray()) throw new IllegalArgumentException(where + ": no array '" + key + "'");
        return a;
    }

    /** A ratio or a difference: a number, or the "NaN" / "Infinity" Jackson writes for a non-finite one. */
    private static double number(JsonNode o, String key, String where) {
        JsonNode v = o.get(key);
        if (v == null) throw new IllegalArgumentException(where + ": no '" + key + "'");
        if (v.isNumber()) return v.doubleValue();
        if (v.isTextual() && List.of("NaN", "Infinity", "-Infinity").contains(v.asText())) return Double.parseDouble(v.asText());
        throw new IllegalArgumentException(where + ": '" + key + "' is not a number");
    }

    private static Map<String, Double> doubles(JsonNode o, String key, String where) {
        JsonNode m = o.get(key);
        if (m == null || !m.isObject()) throw new IllegalArgumentException(where + ": no object '" + key + "'");
        Map<String, Double> out = new LinkedHashMap<>();
        for (var it = m.fieldNames(); it.hasNext(); ) {
            String k = it.next();
            out.put(k, number(m, k, where + " " + key));
        }
        return out;
    }
}
