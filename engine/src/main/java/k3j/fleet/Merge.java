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
import k3j.conform.LayerSelection;
import k3j.io.StrictJson;

/**
 * The one merge of a results root's shard folders. It trusts only each folder's plan, completion marker and results,
 * never a scheduler's exit code. The run is the one most folders name (model, reference, build, count, scope, plan);
 * every shard of it must appear exactly once and complete, or the merge is INCOMPLETE and names the layers (and the
 * logit part) not judged.
 *
 * @param shards    one line per shard of the run and per foreign or unreadable folder
 * @param notJudged the layer ranges (and "logits") not judged; empty when complete
 * @param toRun     the run's shards with no folder or an unfinished one: what to run again (a duplicate is not among them)
 */
public record Merge(Path root, Identity identity, List<String> shards, List<String> problems, List<String> notJudged, List<Integer> judgedLayers, List<Integer> toRun,
                    Judged judged) {
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

    public static Merge of(Path root) throws IOException {
        if (!Files.isDirectory(root)) throw new IOException("--merge " + root + ": no such folder (the results root the shards wrote into)");
        List<ShardFolder.Read> reads = new ArrayList<>();
        try (Stream<Path> s = Files.list(root)) {
            for (Path d : s.filter(Files::isDirectory).sorted(Comparator.comparing(p -> p.getFileName().toString())).toList()) {
                ShardFolder.Read r = ShardFolder.read(d);
                if (r != null) reads.add(r);
            }
        }
        List<String> lines = new ArrayList<>(), problems = new ArrayList<>();
        if (reads.isEmpty()) {
            return new Merge(root, null, List.of(), List.of("no shard folder (shard-I-of-N with a " + ShardFolder.PLAN + ") under " + root),
                    List.of("every layer"), List.of(), List.of(), new Judged(List.of(), null, List.of(), List.of(), null));
        }
        // the run: the identity most folders name, ties to the first folder
        Map<Identity, Integer> votes = new LinkedHashMap<>();
        for (ShardFolder.Read r : reads) if (r.identity() != null) votes.merge(r.identity(), 1, Integer::sum);
        Identity run = votes.entrySet().stream().max(Comparator.comparingInt(Map.Entry<Identity, Integer>::getValue)).map(Map.Entry::getKey).orElse(null);
        if (run == null) {
            for (ShardFolder.Read r : reads) problems.add(r.dir().getFileName() + ": " + r.problem());
            return new Merge(root, null, problems, problems, List.of("every layer"), List.of(), List.of(), new Judged(List.of(), null, List.of(), List.of(), null));
        }
        List<String> parts = List.of(run.plan().split(" \\| "));
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
        TreeSet<Integer> notJudged = new TreeSet<>();
        boolean logitsNotJudged = false;
        List<Integer> judgedLayers = new ArrayList<>();
        List<Judged> complete = new ArrayList<>();
        List<Integer> toRun = new ArrayList<>();
        for (int i = 0; i < run.count(); i++) {
            int index = i;
            String part = i < parts.size() ? parts.get(i) : "?";
            List<ShardFolder.Read> claim = mine.stream().filter(r -> r.id().index() == index).toList();
            String status;
            if (claim.size() == 1 && claim.getFirst().complete()) {
                complete.add(claim.getFirst().judged());
                judgedLayers.addAll(claim.getFirst().layers());
                status = "complete";
            } else {
                status = claim.isEmpty() ? "MISSING     no folder of this run holds it"
                        : claim.size() > 1 ? "DUPLICATE   " + claim.size() + " folders claim it: " + String.join(", ", claim.stream().map(r -> r.dir().getFileName().toString()).toList())
                        : "UNFINISHED  " + claim.getFirst().problem();
                if (claim.size() < 2) toRun.add(i);
                problems.add("shard " + i + "/" + run.count() + " (" + part + "): " + status.substring(12));
                String layers = part.replace(" + logits", "");
                if (!layers.equals("-") && !layers.equals("?")) notJudged.addAll(LayerSelection.parse(layers, k3j.config.ModelConfig.MAX_LAYERS));
                if (part.endsWith(" + logits")) logitsNotJudged = true;
            }
            lines.add(String.format("shard %-8s %-22s %s", i + "/" + run.count(), part, status));
        }
        List<String> nj = new ArrayList<>();
        if (!notJudged.isEmpty()) nj.add(LayerSelection.format(new ArrayList<>(notJudged)));
        if (logitsNotJudged) nj.add("logits");
        if (!problems.isEmpty() && nj.isEmpty()) nj.add("none of the run's own, but foreign or unreadable folders are mixed in");
        return new Merge(root, run, lines, problems, nj, judgedLayers.stream().sorted().toList(), toRun, combine(complete));
    }

    /** The complete shards' results as one run's: layers in order, the sweep, the logit part. */
    static Judged combine(List<Judged> shards) {
        List<Judged.Layer> layers = new ArrayList<>();
        List<Judged.Experts> experts = new ArrayList<>();
        List<Judged.Block> logits = new ArrayList<>();
        String sweep = null;
        Judged.Block greedy = null;
        for (Judged j : shards) {
            layers.addAll(j.layers());
            experts.addAll(j.experts());
            logits.addAll(j.logits());
            if (j.sweep() != null) sweep = j.sweep();
            if (j.greedy() != null) greedy = j.greedy();
        }
        layers.sort(Comparator.comparingInt(Judged.Layer::layer));
        experts.sort(Comparator.comparingInt(Judged.Experts::layer));
        return new Judged(layers, sweep, experts, logits, greedy);
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
            if (judged.sweep() != null) sb.append(Summary.sweep(judged, 0));
            for (Judged.Block b : judged.logits()) sb.append('\n').append(b.text());
            if (judged.greedy() != null) sb.append('\n').append(judged.greedy().text());
        } else {
            sb.append("=".repeat(78)).append('\n');
            problems.forEach(p -> sb.append("INCOMPLETE: ").append(p).append('\n'));
            sb.append("NOT JUDGED: ").append(String.join(", ", notJudged)).append('\n');
            sb.append("=".repeat(78)).append('\n');
            sb.append("VERDICT: INCOMPLETE (").append(problems.size()).append(" problem(s); ").append(String.join(", ", notJudged)).append(" not judged)\n");
        }
        return sb.toString();
    }

    /** The merged --json: the layers as a one-machine run writes them, the verdict, and every shard's state. */
    public ObjectNode json() {
        ObjectNode root = StrictJson.MAPPER.createObjectNode();
        Judged.putLayers(root.putArray("layers"), judged.layers());
        Summary.putVerdict(root, judged, judgedLayers, notJudged);
        if (identity != null) root.put("count", identity.count());
        toRun.forEach(root.putArray("shards_to_run")::add);
        shards.forEach(root.putArray("shards")::add);
        return root;
    }
}
