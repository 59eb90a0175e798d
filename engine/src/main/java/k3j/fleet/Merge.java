package k3j.fleet;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import k3j.compare.Causes;
import k3j.compare.ExpertLayerReport;
import k3j.compare.ExpertReport;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.compare.StageMetric;
import k3j.io.StrictJson;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;

/**
 * The one merge of a results root's shard folders. It trusts only each folder's plan, completion marker and results,
 * never a scheduler's exit code. The run is the one most folders name (model, reference, build, count, scope, plan);
 * every shard of it must appear exactly once and complete, or the merge is INCOMPLETE and names the layers, the logit
 * part and the (layer, expert range)s not judged. Complete, it reads the causes from every layer together ({@link Causes},
 * as a one-machine run does) and decides through the one decision ({@link Invariants#decide}).
 *
 * @param shards    one line per shard of the run and per foreign or unreadable folder
 * @param notJudged the layer ranges, "logits" and "experts L5:0-191" not judged; empty when complete
 * @param toRun     the run's shards with no folder or an unfinished one: what to run again (a duplicate is not among them)
 * @param verdict   the decision over every planned item: judged ones as the shards judged them, the rest not judged
 */
public record Merge(Path root, Identity identity, List<String> shards, List<String> problems, List<String> notJudged, List<Integer> judgedLayers, List<Integer> toRun,
                    Judged judged, Verdict verdict) {
    public Merge {
        shards = List.copyOf(shards);
        problems = List.copyOf(problems);
        notJudged = List.copyOf(notJudged);
        judgedLayers = List.copyOf(judgedLayers);
        toRun = List.copyOf(toRun);
    }

    public boolean complete() {
        return problems.isEmpty();
    }

    private static final Judged NOTHING = new Judged(List.of(), null, List.of(), List.of(), null);

    private static Merge nothing(Path root, List<String> lines, List<String> problems) {
        Verdict v = Invariants.decide(Invariants.Mode.FLOAT32, List.of(Invariants.Item.notJudged("every layer", String.join("; ", problems))));
        return new Merge(root, null, lines, problems, List.of("every layer"), List.of(), List.of(), NOTHING, v);
    }

    /**
     * What the reference defines, and so what a complete merge must hold judged, whatever the shards' plans say:
     * every layer; with logits both logit blocks (full recompute, incremental) and greedy generation when the reference
     * generated ids; with the sweep every MoE layer's experts whole. {@code producer} is what made the reference.
     */
    public record Coverage(int layers, boolean logits, boolean greedy, List<Integer> moeLayers, int experts, k3j.dump.ReferenceDump reference) {
        /** The coverage of a run ({@link Identity#scope()}: "logits=true experts=false") against its reference. */
        public static Coverage of(k3j.dump.ReferenceDump d, String scope) {
            boolean logits = scope.contains("logits=true") && d.has("logits");
            List<Integer> moe = new ArrayList<>();
            int experts = 0;
            if (scope.contains("experts=true")) {
                k3j.config.ModelConfig cfg = k3j.config.ConfigReader.read(d.field("config"), d.source() + " config");
                experts = cfg.expertCount();
                for (int l = 0; l < cfg.layerCount(); l++) if (cfg.mlpKind(l) == k3j.config.MlpKind.MOE) moe.add(l);
            }
            return new Coverage(d.layerCount(), logits, logits && d.generatedIds().length > 0, List.copyOf(moe), experts, d);
        }

        /** What {@code all} leaves unjudged of what the reference defines (empty when all of it is judged). */
        List<String> missing(Judged all) {
            List<String> out = new ArrayList<>();
            TreeSet<Integer> layers = new TreeSet<>();
            for (int l = 0; l < this.layers; l++) layers.add(l);
            for (Judged.Layer l : all.layers()) layers.remove(l.layer());
            if (!layers.isEmpty()) out.add(LayerSelection.format(new ArrayList<>(layers)));
            if (logits) {
                for (String mode : List.of("full recompute", "incremental")) {
                    if (all.logits().stream().noneMatch(b -> b.name().equals("logits " + mode))) out.add("logits (" + mode + ")");
                }
                if (greedy && all.greedy() == null) out.add("greedy ids");
            }
            for (int l : moeLayers) {
                if (all.experts().stream().noneMatch(e -> e.layer() == l && e.whole() && e.total() == experts)) out.add("experts of L" + l);
            }
            return out;
        }
    }

    /**
     * The merge of {@code root}, its coverage taken from the run's reference: {@code reference} finds it by the manifest
     * sha256 the shards name (throwing when there is none), so no plan the shards write can leave a layer, a logit block
     * or an expert range out unnoticed; the verdict names the reference's producer. Every complete shard's tensor
     * digests must be {@code manifest}'s (docs/formats.md §18.5), for every tensor its part judges: a shard that read
     * other bytes, or left a tensor out of its marker, is foreign.
     */
    public static Merge of(Path root, java.util.function.Function<String, k3j.dump.ReferenceDump> reference, TensorDigests manifest) throws IOException {
        java.util.Objects.requireNonNull(manifest, "a merge needs the model's tensor digest manifest");
        if (!Files.isDirectory(root)) throw new IOException("--merge " + root + ": no such folder (the results root the shards wrote into)");
        List<ShardFolder.Read> reads = new ArrayList<>();
        try (Stream<Path> s = Files.list(root)) {
            for (Path d : s.filter(Files::isDirectory).sorted(Comparator.comparing(p -> p.getFileName().toString())).toList()) {
                ShardFolder.Read r = ShardFolder.read(d);
                if (r != null) reads.add(r);
            }
        }
        List<String> lines = new ArrayList<>(), problems = new ArrayList<>();
        if (reads.isEmpty()) return nothing(root, List.of(), List.of("no shard folder (shard-I-of-N with a " + ShardFolder.PLAN + ") under " + root));
        // the run: the identity most folders name, ties to the first folder
        Map<Identity, Integer> votes = new LinkedHashMap<>();
        for (ShardFolder.Read r : reads) if (r.identity() != null) votes.merge(r.identity(), 1, Integer::sum);
        Identity run = votes.entrySet().stream().max(Comparator.comparingInt(Map.Entry<Identity, Integer>::getValue)).map(Map.Entry::getKey).orElse(null);
        if (run == null) {
            for (ShardFolder.Read r : reads) problems.add(r.dir().getFileName() + ": " + r.problem());
            return nothing(root, problems, problems);
        }
        List<WorkPlan.Part> parts = new ArrayList<>();
        String[] texts = run.plan().split(" \\| ");
        try {
            for (int i = 0; i < texts.length; i++) parts.add(WorkPlan.Part.parse(i, texts[i]));
        } catch (IllegalArgumentException e) {
            return nothing(root, List.of(), List.of("the run's plan '" + run.plan() + "' is unreadable: " + e.getMessage()));
        }
        if (parts.size() != run.count()) return nothing(root, List.of(), List.of("the run's plan has " + parts.size() + " parts for " + run.count() + " shards"));
        TreeSet<Integer> planned = new TreeSet<>();
        for (WorkPlan.Part p : parts) for (int l : p.layers()) if (!planned.add(l)) problems.add("the run's plan holds layer " + l + " twice");
        if (!planned.isEmpty() && (planned.first() != 0 || planned.last() != planned.size() - 1)) problems.add("the run's plan leaves layers out: it holds " + LayerSelection.format(new ArrayList<>(planned)));
        List<ShardFolder.Read> mine = new ArrayList<>();
        for (ShardFolder.Read r : reads) {
            if (r.identity() == null) {
                problems.add(r.dir().getFileName() + ": " + r.problem());
                lines.add(String.format("%-14s %s", r.dir().getFileName(), "UNREADABLE  " + r.problem()));
            } else if (!r.identity().equals(run)) {
                String why = "FOREIGN     its " + String.join(", ", run.differences(r.identity())) + " differ from the run's (" + (votes.get(run)) + " folder(s))";
                problems.add(r.dir().getFileName() + ": " + why.substring(12));
                lines.add(String.format("%-14s %s", r.dir().getFileName(), why));
            } else {
                mine.add(r);
            }
        }
        // the bytes each shard judged: every digest it recorded is the manifest's, and it recorded every tensor of the
        // manifest its part judges (a marker with digests left out vouches for nothing)
        for (ShardFolder.Read r : List.copyOf(mine)) {
            if (!r.complete()) continue;
            List<String> differ = manifest.disagreements(r.digests());
            if (r.id().index() < parts.size()) differ.addAll(r.digests().unhashed(manifest, ShardFolder.judges(parts.get(r.id().index()))));
            if (!differ.isEmpty()) {
                String why = "FOREIGN     judged other tensor bytes: " + String.join(", ", differ.subList(0, Math.min(3, differ.size()))) + (differ.size() > 3 ? ", ..." : "");
                problems.add(r.dir().getFileName() + ": " + why.substring(12));
                lines.add(String.format("%-14s %s", r.dir().getFileName(), why));
                mine.remove(r);
            }
        }
        TreeSet<Integer> notJudged = new TreeSet<>();
        boolean logitsNotJudged = false;
        List<WorkPlan.ExpertRange> expertsNotJudged = new ArrayList<>();
        List<Judged> complete = new ArrayList<>();
        List<Integer> toRun = new ArrayList<>();
        for (int i = 0; i < run.count(); i++) {
            int index = i;
            WorkPlan.Part part = parts.get(i);
            List<ShardFolder.Read> claim = mine.stream().filter(r -> r.id().index() == index).toList();
            String status;
            if (claim.size() == 1 && claim.getFirst().complete()) {
                complete.add(claim.getFirst().judged());
                status = "complete";
            } else {
                status = claim.isEmpty() ? "MISSING     no folder of this run holds it"
                        : claim.size() > 1 ? "DUPLICATE   " + claim.size() + " folders claim it: " + String.join(", ", claim.stream().map(r -> r.dir().getFileName().toString()).toList())
                        : "UNFINISHED  " + claim.getFirst().problem();
                if (claim.size() < 2) toRun.add(i);
                problems.add("shard " + i + "/" + run.count() + " (" + part.text() + "): " + status.substring(12));
                notJudged.addAll(part.layers());
                logitsNotJudged |= part.logits();
                expertsNotJudged.addAll(part.experts());
            }
            lines.add(String.format("shard %-8s %-22s %s", i + "/" + run.count(), part.text(), status));
        }
        Judged all = combine(complete);
        Coverage coverage = null;
        try {
            coverage = Coverage.of(reference.apply(run.reference()), run.scope());
        } catch (RuntimeException e) {
            problems.add("the run's reference (manifest sha256 " + run.reference() + "): " + k3j.io.SafeFiles.why(e)
                    + " (what must be judged comes from the reference, never from the shards' plans: name it with --reference)");
        }
        List<String> nj = new ArrayList<>();
        if (coverage != null) {
            for (String x : coverage.missing(all)) {
                if (x.matches("[0-9,-]+")) {
                    for (int l : LayerSelection.parse(x, k3j.config.ModelConfig.MAX_LAYERS)) {
                        if (!notJudged.contains(l)) problems.add("the reference defines layer " + l + ", and no shard's plan holds it");
                        notJudged.add(l);
                    }
                } else {
                    boolean inPlan = x.startsWith("experts") ? !expertsNotJudged.isEmpty() : logitsNotJudged;   // logit blocks and greedy ids are the logit part
                    if (!inPlan) {
                        problems.add("the reference defines " + x + ", and no complete shard of the run judged it");
                        nj.add(x);
                    }
                }
            }
        } else if (notJudged.isEmpty() && !logitsNotJudged) {
            nj.add("what the reference defines (it was not found)");
        }
        if (!notJudged.isEmpty()) nj.addFirst(LayerSelection.format(new ArrayList<>(notJudged)));
        if (logitsNotJudged) nj.add("logits");
        if (!expertsNotJudged.isEmpty()) {
            expertsNotJudged.sort(Comparator.comparingInt(WorkPlan.ExpertRange::layer).thenComparingInt(WorkPlan.ExpertRange::from));
            nj.add("experts " + String.join(",", expertsNotJudged.stream().map(WorkPlan.ExpertRange::text).toList()));
        }
        if (!problems.isEmpty() && nj.isEmpty()) nj.add("none of the run's own, but foreign or unreadable folders are mixed in");
        List<Invariants.Item> items = new ArrayList<>();
        for (Judged.Layer l : all.layers()) items.add(item(l));
        for (Judged.Experts e : all.experts()) items.add(e.whole() ? item(e) : Invariants.Item.notJudged("experts " + e.range(), "the rest of the layer's experts are not judged"));
        k3j.verdict.Finding cause = Causes.runCause(all.layers().stream().map(Judged.Layer::report).toList());
        for (Judged.Block b : all.logits()) items.add(Causes.carry(b.item(), cause));
        if (all.greedy() != null) items.add(all.greedy().item());
        for (String n : nj) items.add(Invariants.Item.notJudged(n, "no complete shard of the run judged it"));
        for (String p : problems) if (!p.startsWith("shard ")) items.add(Invariants.Item.notJudged("the run", p));
        List<Integer> judgedLayers = all.layers().stream().map(Judged.Layer::layer).toList();
        Verdict verdict = Invariants.decide(Invariants.Mode.FLOAT32, items);
        if (coverage != null) verdict = verdict.against(coverage.reference().producer(), coverage.reference().promptId());
        return new Merge(root, run, lines, problems, nj, judgedLayers, toRun, all, verdict);
    }

    /**
     * A layer's item: {@link LayerReport#item}, and refused when the report passes yet holds a non-finite value (a
     * results file edited or read differently from how it was judged is never green).
     */
    static Invariants.Item item(Judged.Layer l) {
        LayerReport r = l.report();
        if (r.conforms()) {
            for (StageMetric m : r.stages()) {
                if (!m.finite() || !Double.isFinite(m.ratio()) || !Double.isFinite(m.maxAbsDiff())) {
                    return Invariants.Item.refused(r.name(), "refused (invariant 1): stage " + m.stage() + " passes with a non-finite value");
                }
            }
        }
        return r.item();
    }

    /** A whole swept layer's item, refused when it passes yet holds a non-finite ratio. */
    static Invariants.Item item(Judged.Experts e) {
        ExpertLayerReport r = e.report();
        if (r.conforms()) {
            for (ExpertReport x : r.experts()) {
                for (double v : x.ratios()) if (!Double.isFinite(v)) return Invariants.Item.refused("experts of L" + e.layer(), "refused (invariant 1): expert " + x.expert() + " passes with a non-finite ratio");
            }
        }
        return r.item();
    }

    /**
     * The complete shards' results as one run's: the layers in order with their causes read from all of them together
     * ({@link Causes}, the one-machine run's rule), each MoE layer's expert ranges joined (whole when they cover it),
     * the sweep, the logit part.
     */
    static Judged combine(List<Judged> shards) {
        List<Judged.Layer> layers = new ArrayList<>();
        List<Judged.Experts> ranges = new ArrayList<>();
        List<Judged.Block> logits = new ArrayList<>();
        String sweep = null;
        Judged.Block greedy = null;
        for (Judged j : shards) {
            layers.addAll(j.layers());
            ranges.addAll(j.experts());
            logits.addAll(j.logits());
            if (j.sweep() != null) sweep = j.sweep();
            if (j.greedy() != null) greedy = j.greedy();
        }
        layers.sort(Comparator.comparingInt(Judged.Layer::layer));
        Map<Integer, Boolean> boundary = new LinkedHashMap<>();
        for (Judged.Layer l : layers) boundary.put(l.layer(), l.boundary());
        List<LayerReport> caused = Causes.classify(layers.stream().map(Judged.Layer::report).toList(), l -> boundary.get(l));
        List<Judged.Layer> out = new ArrayList<>();
        for (LayerReport r : caused) out.add(new Judged.Layer(r, boundary.get(r.layer())));
        ranges.sort(Comparator.comparingInt(Judged.Experts::layer).thenComparingInt(Judged.Experts::from));
        List<Judged.Experts> experts = new ArrayList<>();
        for (Judged.Experts e : ranges) {
            Judged.Experts last = experts.isEmpty() ? null : experts.getLast();
            if (last != null && last.layer() == e.layer() && last.to() == e.from() && last.total() == e.total()) {
                List<ExpertReport> joined = new ArrayList<>(last.experts());
                joined.addAll(e.experts());
                experts.set(experts.size() - 1, new Judged.Experts(e.layer(), e.kind(), e.total(), last.from(), e.to(), joined, last.seconds() + e.seconds()));
            } else {
                experts.add(e);
            }
        }
        return new Judged(out, sweep, experts, logits, greedy);
    }

    /** The merged run's text, as a one-machine run prints it after its layer lines, or the INCOMPLETE verdict. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        sb.append("results   : ").append(root).append('\n');
        if (identity != null) {
            sb.append("model     : sha256 ").append(identity.model()).append('\n');
            sb.append("reference : manifest sha256 ").append(identity.reference()).append('\n');
            sb.append("build     : sha256 ").append(identity.build()).append('\n');
            sb.append("plan      : ").append(identity.count()).append(" shards: ").append(identity.plan()).append('\n');
        }
        shards.forEach(l -> sb.append(l).append('\n'));
        for (Judged.Layer l : judged.layers()) sb.append(l.line()).append('\n');
        double seconds = judged.layers().stream().mapToDouble(Judged.Layer::seconds).sum();
        if (complete()) {
            sb.append(Summary.layers(judged, judgedLayers, seconds));
            if (judged.sweep() != null) sb.append(Summary.sweep(judged, judged.experts().stream().mapToDouble(Judged.Experts::seconds).sum()));
            for (Judged.Block b : judged.logits()) sb.append('\n').append(b.text());
            if (judged.greedy() != null) sb.append('\n').append(judged.greedy().text());
        } else {
            sb.append("=".repeat(78)).append('\n');
            problems.forEach(p -> sb.append("INCOMPLETE: ").append(p).append('\n'));
            sb.append("NOT JUDGED: ").append(String.join(", ", notJudged)).append('\n');
            sb.append("=".repeat(78)).append('\n');
        }
        sb.append('\n').append(verdict.text());
        return sb.toString();
    }

    /** The merged --json: the layers as a one-machine run writes them, the verdict, and every shard's state. */
    public ObjectNode json() {
        ObjectNode root = StrictJson.MAPPER.createObjectNode();
        Judged.putLayers(root.putArray("layers"), judged.layers());
        Summary.putVerdict(root, judged, judgedLayers, verdict, notJudged);
        // the one decision itself, as k3 conform --json writes it (docs/formats.md §15): what the report renders
        root.set("verdict", StrictJson.MAPPER.valueToTree(verdict.json()));
        if (identity != null) root.put("count", identity.count());
        toRun.forEach(root.putArray("shards_to_run")::add);
        shards.forEach(root.putArray("shards")::add);
        return root;
    }
}
