import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;

/**
 * One verdict over several runs' verdict files (CI's profiles in one report, a shard root's shards and their merge),
 * decided by the one decision (Invariants.decide): each run is one item, as its own verdict file decided it; a run that
 * wrote no verdict is not judged. The first screen's fields are the runs' own, gathered: the first divergence of the
 * first run (in the order given) that has one, each part's counts summed, the failing layers, skips and catches of
 * every run, each layer's outcome. ci/report runs it (java --class-path build/k3/k3.jar ci/RunVerdicts.java OUT RUN=VERDICT_FILE ...; a
 * missing VERDICT_FILE is a run that wrote none) and the report renders OUT.
 */
public final class RunVerdicts {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: RunVerdicts OUT.json RUN=VERDICT.json ...");
            System.exit(2);
        }
        ObjectMapper json = new ObjectMapper();
        List<Invariants.Item> items = new ArrayList<>();
        ObjectNode out = json.createObjectNode();
        ArrayNode runs = out.putArray("runs"), failing = json.createArrayNode(), catches = json.createArrayNode();
        ObjectNode counts = json.createObjectNode(), layers = json.createObjectNode();
        Set<String> engines = new LinkedHashSet<>(), models = new LinkedHashSet<>(), references = new LinkedHashSet<>(), shas = new LinkedHashSet<>(),
                bisects = new LinkedHashSet<>();
        JsonNode first = null;
        boolean lossy = false, joins = true;
        long caught = 0;
        for (String a : java.util.Arrays.asList(args).subList(1, args.length)) {
            String run = a.substring(0, a.indexOf('=')), file = a.substring(a.indexOf('=') + 1);
            runs.add(run);
            File f = new File(file);
            if (!f.isFile()) {
                items.add(Invariants.Item.notJudged("run " + run, "it wrote no verdict (it ended before its first case, or is still running)"));
                joins = false;
                continue;
            }
            JsonNode v = json.readTree(f);
            String outcome = v.path("outcome").asText("");
            String what = "run " + run + (v.hasNonNull("engine") ? " (" + v.path("engine").asText() + ")" : "");
            String why = String.join("; ", texts(v.path("findings")));
            switch (outcome) {
                case "CONFORMS" -> items.add(Invariants.Item.pass(what));
                case "WITHIN" -> { items.add(Invariants.Item.pass(what)); lossy = true; }
                case "DOES_NOT_CONFORM" -> items.add(Invariants.Item.fail(what, why));
                case "OUTSIDE" -> { items.add(Invariants.Item.fail(what, why)); lossy = true; }
                case "REFUSED" -> items.add(Invariants.Item.refused(what, why));
                case "NO_CHECKPOINT" -> { if (!v.path("finished").asBoolean(true)) items.add(Invariants.Item.notJudged(what, "did not end")); }
                case "INCOMPLETE" -> items.add(Invariants.Item.notJudged(what, why));
                default -> items.add(Invariants.Item.notJudged(what, "its verdict file names no outcome this harness knows (" + outcome + ")"));
            }
            if (!v.path("joins_history").asBoolean(false)) joins = false;
            if (v.hasNonNull("engine")) engines.add(v.path("engine").asText());
            if (v.hasNonNull("model")) models.add(v.path("model").asText());
            if (v.hasNonNull("reference_dump")) references.add(v.path("reference_dump").asText());
            if (v.hasNonNull("reference_manifest_sha256")) shas.add(v.path("reference_manifest_sha256").asText());
            v.path("layers").properties().forEach(e -> layers.set(e.getKey(), e.getValue()));
            if (first == null && v.hasNonNull("first_divergence")) {
                first = v.path("first_divergence");
                bisects.add(v.path("bisect").asText());
            } else if (v.path("candidate_run").asBoolean(false)) bisects.add(v.path("bisect").asText());
            v.path("failing_layers").forEach(failing::add);
            v.path("catches").forEach(catches::add);
            caught += v.path("catches_caught").asLong(0);
            for (Iterator<Map.Entry<String, JsonNode>> it = v.path("counts").properties().iterator(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> e = it.next();
                ObjectNode c = counts.has(e.getKey()) ? (ObjectNode) counts.get(e.getKey()) : counts.putObject(e.getKey());
                for (String n : List.of("total", "passed", "failed", "skipped")) c.put(n, c.path(n).asLong(0) + e.getValue().path(n).asLong(0));
                ArrayNode skips = c.has("skips") ? (ArrayNode) c.get("skips") : c.putArray("skips");
                e.getValue().path("skips").forEach(skips::add);
            }
        }
        boolean checked = !items.isEmpty();
        Verdict d = Invariants.decide(lossy ? Invariants.Mode.LOSSY : Invariants.Mode.FLOAT32, items);
        out.put("format", "k3-verdict");
        out.put("outcome", checked ? d.outcome().name() : "NO_CHECKPOINT");
        out.put("words", checked ? d.outcome().words() : "NO CHECKPOINT CHECKED");
        out.put("headline", out.path("words").asText());
        out.put("green", checked && d.green());
        out.set("findings", json.valueToTree(d.findings()));
        out.set("judged", json.valueToTree(d.judged()));
        out.set("not_judged", json.valueToTree(checked ? d.notJudged() : List.of()));
        out.put("joins_history", joins && checked && d.outcome() != Verdict.Outcome.INCOMPLETE);
        if (!engines.isEmpty()) out.put("engine", String.join("; ", engines));
        if (!models.isEmpty()) out.put("model", String.join("; ", models));
        if (!references.isEmpty()) out.put("reference_dump", String.join("; ", references));
        if (!shas.isEmpty()) out.put("reference_manifest_sha256", String.join("; ", shas));
        out.set("layers", layers);
        out.set("first_divergence", first);
        out.put("first_divergence_text", first != null ? null : !checked ? "no checkpoint was checked in these runs"
                : d.green() ? "none: every run's verdict is green" : "none named: " + String.join("; ", d.findings().isEmpty() ? d.notJudged() : d.findings()));
        out.put("bisect", bisects.isEmpty() ? "nothing to diagnose" : String.join(" | ", bisects));
        out.set("failing_layers", failing);
        out.set("counts", counts);
        out.set("catches", catches);
        out.put("catches_caught", caught);
        json.writerWithDefaultPrettyPrinter().writeValue(new File(args[0]), out);
        System.out.println(d.line().replace(d.outcome().words(), out.path("words").asText()) + " (" + (args.length - 1) + " runs)");
    }

    private static List<String> texts(JsonNode a) {
        List<String> l = new ArrayList<>();
        a.forEach(x -> l.add(x.asText()));
        return l;
    }
}
