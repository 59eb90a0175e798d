package k3j.harness;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.model.Attachment;
import io.qameta.allure.model.Label;
import io.qameta.allure.model.Status;
import io.qameta.allure.model.TestResult;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import k3j.verdict.Finding;
import k3j.verdict.PlanVerdict;

/**
 * What the report's first screen shows of a run, decided here from the cases as they are written and kept in the
 * run's verdict file beside the decision ({@link RunPlan}); the report renders these fields and decides nothing
 * (docs/report.md, "The first screen"): the headline, the first divergence (a failing model-level check, else the
 * lowest failing layer at its first stage over budget, else the lowest failing expert sweep, else the logits), bisect's
 * line (on a candidate: that bisect does not apply and how to confirm a suspected binding), each part's counts (the
 * layers part counts layers, not its overview case), the failing layers, every skip with its reason, each layer's
 * outcome (what the trend compares) and every planted wrong port with whether its gate caught it.
 */
final class RunStory {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern LAYER = Pattern.compile("^L(\\d+)$"), EXPERTS = Pattern.compile("^L(\\d+) experts$"), TAG = Pattern.compile("^\\s*(\\[[^\\]]+\\])");
    private static final List<String> KINDS = List.of("torch mutant", "wrong port", "binding mutant", "expert corruption", "tampered dump", "edited trunk");
    /** The report's parts with their counts, in the order the first screen lists them. */
    private static final List<String> COUNTED = List.of("model", "layers", "experts", "logits", "greedy ids", "engine gates", "harness self-tests");

    /** One written case: its part, name, status, the plan item it judges, its category and first message line. */
    private record Case(String uuid, String part, String name, Status status, String item, String category, String message, JsonNode metrics) {}

    private final List<Case> cases = new ArrayList<>();
    private final List<Map<String, Object>> caught = new ArrayList<>();
    private String engine, model, referenceDump, referenceSha256;
    private boolean candidate;

    /** Who computed the activations under test (the candidate's engine, or k3j's forward), over what, against which reference. */
    synchronized void identity(String engine, String model, String referenceDump, String referenceSha256, boolean candidate) {
        this.engine = engine;
        this.model = model;
        this.referenceDump = referenceDump;
        this.referenceSha256 = referenceSha256;
        this.candidate = candidate;
    }

    /** One case as it is written, with the plan item it judges (or null) and the folder its attachments are in. */
    synchronized void add(TestResult t, String item, Path results) {
        String part = label(t, ReportPart.LABEL);
        String message = t.getStatusDetails() == null || t.getStatusDetails().getMessage() == null ? "" : t.getStatusDetails().getMessage();
        JsonNode metrics = attachment(t, "stage metrics", results);
        String category = metrics != null && metrics.hasNonNull("finding") ? tag(metrics.path("finding").asText()) : tagOf(message);
        if (category == null && failed(t.getStatus())) category = t.getStatus() == Status.BROKEN ? "[broken]" : "[failed]";
        String first = message.lines().findFirst().orElse("").trim();
        cases.add(new Case(t.getUuid(), part, t.getName() == null ? "" : t.getName(), t.getStatus(), item, category, first, metrics));
        for (Attachment a : t.getAttachments()) {
            if (!Caught.ATTACHMENT.equals(a.getName())) continue;
            JsonNode c = read(results, a.getSource());
            if (c == null) continue;
            Map<String, Object> row = JSON.convertValue(c, Map.class);
            row.put("uuid", t.getUuid());
            Matcher g = Pattern.compile("(\\w+Gate)\\.").matcher(t.getFullName() == null ? "" : t.getFullName());
            row.put("gate", g.find() ? g.group(1) : "-");
            // caught: its gate named a category and its case passed (a plant nothing caught fails its case)
            row.put("caught", c.hasNonNull("category") && t.getStatus() == Status.PASSED);
            caught.add(row);
        }
    }

    /** The first screen's fields for the verdict file, rendered from {@code decided} and the cases written so far. */
    synchronized Map<String, Object> fields(PlanVerdict decided, List<String> planned) {
        Map<String, Object> m = new LinkedHashMap<>();
        boolean checkpoint = !decided.outcome().equals("NO_CHECKPOINT");
        m.put("headline", decided.words());
        m.put("engine", engine);
        m.put("model", model);
        m.put("candidate_run", candidate);
        m.put("reference_dump", referenceDump);
        m.put("reference_manifest_sha256", referenceSha256);
        m.put("planned_count", planned.size());
        m.put("judged_count", decided.judged().size());
        m.put("not_judged_count", decided.notJudged().size());
        // a run that did not judge all it planned is no measurement to compare later runs with
        m.put("joins_history", !decided.outcome().equals("INCOMPLETE"));
        Case first = checkpoint ? firstDivergence() : null;
        m.put("first_divergence", first == null ? null : divergence(first, planned));
        m.put("first_divergence_text", first != null ? null : !checkpoint ? "no checkpoint was checked in this run"
                : decided.outcome().equals("CONFORMS") ? "none: all " + planned.size() + " planned items were judged and conform"
                : decided.outcome().equals("INCOMPLETE") ? "not known: the run did not judge everything it planned"
                : "none named: " + String.join("; ", decided.findings()));
        m.put("bisect", bisect(first));
        List<Case> layers = cases.stream().filter(c -> c.item() != null && LAYER.matcher(c.item()).matches())
                .sorted(Comparator.comparingInt(c -> layerOf(c.item()))).toList();
        m.put("failing_layers", layers.stream().filter(c -> failed(c.status())).map(c -> Map.of("uuid", c.uuid(), "name", c.name())).toList());
        Map<String, Object> each = new TreeMap<>(Comparator.comparingInt(RunStory::layerOf));
        for (Case c : layers) {
            Map<String, Object> l = new LinkedHashMap<>();
            l.put("conforms", c.status() == Status.PASSED);
            l.put("worst_ratio_to_budget", c.metrics() == null ? null : Evidence.format(c.metrics().path("worst_ratio_to_budget").asDouble(Double.NaN)));
            l.put("uuid", c.uuid());
            l.put("name", c.name());
            each.put(c.item(), l);
        }
        m.put("layers", each);
        Map<String, Object> counts = new LinkedHashMap<>();
        for (String part : COUNTED) counts.put(part, counts(part));
        m.put("counts", counts);
        List<Map<String, Object>> catches = new ArrayList<>();
        for (Map<String, Object> r : caught) catches.add(new LinkedHashMap<>(r));
        catches.sort(Comparator.comparingInt((Map<String, Object> r) -> KINDS.indexOf(String.valueOf(r.get("kind"))))
                .thenComparing(r -> String.valueOf(r.get("gate"))).thenComparing(r -> String.valueOf(r.get("planted"))));
        for (Map<String, Object> r : catches) if (r.get("ratio_to_budget") instanceof Number n) r.put("ratio_to_budget", Evidence.format(n.doubleValue()) + "x");
        m.put("catches", catches);
        m.put("catches_caught", catches.stream().filter(r -> Boolean.TRUE.equals(r.get("caught"))).count());
        return m;
    }

    /** Where the run first departs from the reference, in the order a reader follows cause to symptom, or null. */
    private Case firstDivergence() {
        Case model = cases.stream().filter(c -> ReportPart.MODEL.title.equals(c.part()) && failed(c.status())).findFirst().orElse(null);
        if (model != null) return model;
        Comparator<Case> byLayer = Comparator.comparingInt(c -> layerOf(c.item()));
        Case layer = cases.stream().filter(c -> c.item() != null && LAYER.matcher(c.item()).matches() && failed(c.status())).min(byLayer).orElse(null);
        if (layer != null) return layer;
        Case experts = cases.stream().filter(c -> c.item() != null && EXPERTS.matcher(c.item()).matches() && failed(c.status())).min(byLayer).orElse(null);
        if (experts != null) return experts;
        return cases.stream().filter(c -> ReportPart.LOGITS.title.equals(c.part()) && failed(c.status())).findFirst().orElse(null);
    }

    private Map<String, Object> divergence(Case c, List<String> planned) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("uuid", c.uuid());
        d.put("where", c.name().replace("\u2007", ""));
        String stage = "-", ratio = null;
        if (c.metrics() != null) {
            stage = c.metrics().path("first_over_budget").asText("-");
            double r = c.metrics().path("worst_ratio_to_budget").asDouble(Double.NaN);
            for (JsonNode s : c.metrics().path("stages")) if (s.path("stage").asText().equals(stage)) r = s.path("ratio_to_budget").asDouble(Double.NaN);
            ratio = Evidence.format(r);
        }
        d.put("stage", stage);
        d.put("category", c.category());
        d.put("ratio_to_budget", ratio);
        boolean logits = ReportPart.LOGITS.title.equals(c.part());
        // on the logits, say whether every layer was judged within budget: else the cause may be a layer not judged
        String before = !logits ? "" : cases.stream().anyMatch(x -> x.item() != null && LAYER.matcher(x.item()).matches())
                && planned.stream().filter(i -> LAYER.matcher(i).matches()).allMatch(i -> cases.stream().anyMatch(x -> i.equals(x.item()) && x.status() == Status.PASSED))
                ? "every layer within budget; " : "not every layer was judged (the cause may be one not judged); ";
        d.put("detail", before + (stage.equals("-") ? "" : "stage " + stage + " · ") + c.category() + (ratio == null ? "" : " · " + ratio + "x budget")
                + (c.metrics() == null && !c.message().isEmpty() ? " · " + TAG.matcher(c.message()).replaceFirst("").trim() : ""));
        return d;
    }

    /** bisect's line: what it found for the first failing layer; on a candidate, that it does not apply and how to confirm a binding instead. */
    private String bisect(Case first) {
        if (candidate) {
            return "does not apply to a candidate dump (bisect re-runs k3j's forward over a model's weights; a candidate holds none). "
                    + "To confirm a suspected binding, make that mix-up in a copy of the reference model "
                    + "(k3 corrupt --corruption=swap:5:self_attn.q_proj.weight,self_attn.k_proj.weight MODEL /tmp/suspect), dump it "
                    + "(k3 /tmp/suspect --ids IDS --gen 1 --dump-activations /tmp/suspect.dump) and compare the dumps "
                    + "(k3 conform --candidate YOUR_DUMP --against /tmp/suspect.dump): the same first divergence and category confirm it";
        }
        if (first == null) return "nothing to diagnose";
        if (first.metrics() != null && first.metrics().hasNonNull("diagnosis")) return first.metrics().path("diagnosis").asText();
        return first.metrics() != null ? "no corruption bisect tries explains it" : "bisect diagnoses a failing layer; the first divergence is not a layer";
    }

    /** A part's counts: the layers part counts its layer cases (not its overview), every other part its cases; every skip with its reason. */
    private Map<String, Object> counts(String part) {
        List<Case> cs = switch (part) {
            case "model" -> byPart(ReportPart.MODEL);
            case "layers" -> byPart(ReportPart.LAYERS).stream().filter(c -> c.item() != null && LAYER.matcher(c.item()).matches()).toList();
            case "experts" -> byPart(ReportPart.EXPERTS);
            case "logits" -> byPart(ReportPart.LOGITS).stream().filter(c -> !RunPlan.GREEDY.equals(c.item())).toList();
            case "greedy ids" -> byPart(ReportPart.LOGITS).stream().filter(c -> RunPlan.GREEDY.equals(c.item())).toList();
            case "engine gates" -> byPart(ReportPart.GATES);
            default -> byPart(ReportPart.HARNESS);
        };
        Map<String, Object> c = new LinkedHashMap<>();
        c.put("total", cs.size());
        c.put("passed", cs.stream().filter(x -> x.status() == Status.PASSED).count());
        c.put("failed", cs.stream().filter(x -> failed(x.status())).count());
        List<Map<String, Object>> skips = new ArrayList<>();
        for (Case x : cs) {
            if (x.status() == Status.PASSED || failed(x.status())) continue;
            Map<String, Object> k = new LinkedHashMap<>();
            k.put("uuid", x.uuid());
            k.put("name", x.name());
            k.put("reason", x.message().isEmpty() ? null : x.message());
            skips.add(k);
        }
        c.put("skipped", skips.size());
        c.put("skips", skips);
        return c;
    }

    private List<Case> byPart(ReportPart p) {
        return cases.stream().filter(c -> p.title.equals(c.part())).toList();
    }

    private static boolean failed(Status s) {
        return s == Status.FAILED || s == Status.BROKEN;
    }

    private static int layerOf(String item) {
        Matcher m = Pattern.compile("^L(\\d+)").matcher(item);
        return m.find() ? Integer.parseInt(m.group(1)) : Integer.MAX_VALUE;
    }

    private static String tag(String finding) {
        try {
            return Finding.valueOf(finding).tag();
        } catch (IllegalArgumentException e) {
            return "[" + finding.toLowerCase(java.util.Locale.ROOT).replace('_', ' ') + "]";
        }
    }

    private static String tagOf(String message) {
        Matcher m = TAG.matcher(message);
        return m.find() ? m.group(1) : null;
    }

    private static String label(TestResult t, String name) {
        return t.getLabels().stream().filter(l -> name.equals(l.getName())).map(Label::getValue).findFirst().orElse(null);
    }

    private static JsonNode attachment(TestResult t, String name, Path results) {
        return t.getAttachments().stream().filter(a -> name.equals(a.getName())).findFirst().map(a -> read(results, a.getSource())).orElse(null);
    }

    private static JsonNode read(Path results, String source) {
        if (results == null || source == null) return null;
        try {
            return JSON.readTree(Files.readString(results.resolve(source)));
        } catch (IOException | RuntimeException e) {
            return null;   // the case keeps its message's category; the decision is RunPlan's and does not read attachments
        }
    }
}
