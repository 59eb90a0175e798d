package k3j.fleet;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.compare.LayerSelection;
import k3j.io.AtomicWrite;
import k3j.io.SafeFiles;
import k3j.io.StrictJson;

/**
 * One shard's folder under the results root, {@code shard-I-of-N/} (docs/formats.md §18.3): {@code plan.json} written
 * before the first layer runs, {@code results.json} after the last check, and the completion marker {@code done.json}
 * written last, atomically, holding the sha256 of the other two. A folder without the marker is unfinished, whatever
 * the scheduler said of the job.
 */
public final class ShardFolder {
    public static final String FORMAT = "k3-conform-shard", PLAN = "plan.json", RESULTS = "results.json", DONE = "done.json";
    public static final long MAX_FILE_BYTES = 1L << 28;
    /**
     * 2: results hold each layer's stage metrics and each swept expert (the merge recomputes causes and verdict from
     * them); 3: the marker holds the sha256 of every tensor the shard judged ({@link TensorDigests}).
     */
    public static final int VERSION = 3;

    private ShardFolder() {}

    /** What a folder holds: complete (marker valid, results read) or not, and why not. */
    public record Read(Path dir, ShardId id, Identity identity, List<Integer> layers, boolean logits, List<WorkPlan.ExpertRange> experts, Judged judged, TensorDigests digests,
                       String problem) {
        public Read(Path dir, ShardId id, Identity identity, List<Integer> layers, boolean logits, List<WorkPlan.ExpertRange> experts, Judged judged, String problem) {
            this(dir, id, identity, layers, logits, experts, judged, null, problem);
        }

        public boolean complete() {
            return problem == null;
        }
    }

    /**
     * Opens the shard's folder for a run: refused when a completion marker is already there (the shard is done: remove
     * its folder to judge it again), stale results of an unfinished run removed, the plan written.
     */
    public static Path start(Path root, ShardId id, Identity identity, WorkPlan.Part part, Path modelPath) throws IOException {
        Path dir = root.resolve(id.folderName());
        if (Files.isSymbolicLink(dir)) {
            throw new IOException(dir + " is a symbolic link (to " + Files.readSymbolicLink(dir) + "): a shard writes into its own folder under the results root, "
                    + "never where a link points; remove the link");
        }
        Files.createDirectories(root);
        k3j.io.Outputs.checkFolder(dir, "the shard folder");
        Files.createDirectories(dir);
        if (Files.exists(dir.resolve(DONE))) {
            throw new IOException(dir + " is already complete (" + DONE + " is there): remove the folder to judge shard " + id + " again");
        }
        Files.deleteIfExists(dir.resolve(RESULTS));
        ObjectNode plan = header(id, identity);
        plan.put("layers", part.layers().isEmpty() ? "-" : LayerSelection.format(part.layers()));
        plan.put("logits", part.logits());
        plan.put("experts", String.join(",", part.experts().stream().map(WorkPlan.ExpertRange::text).toList()));
        plan.put("model_path", modelPath.toAbsolutePath().toString());   // information: identity is the model's content
        plan.put("work", part.work());
        plan.put("bytes_read", part.bytesRead());
        AtomicWrite.string(dir.resolve(PLAN), "the shard plan", pretty(plan));
        return dir;
    }

    /**
     * Which tensors a part judges: every tensor of its layers and of its swept layers, and with the logit part every
     * tensor of the model (it runs all of them).
     */
    public static java.util.function.Predicate<String> judges(WorkPlan.Part part) {
        if (part.logits()) return name -> true;
        java.util.function.Predicate<String> p = name -> false;
        for (int l : part.layers()) p = p.or(TensorDigests.layer(l));
        for (WorkPlan.ExpertRange r : part.experts()) p = p.or(TensorDigests.layer(r.layer()));
        return p;
    }

    /** The results, then the completion marker last, holding the digest of every tensor the shard judged. */
    public static void finish(Path dir, ShardId id, Identity identity, WorkPlan.Part part, Judged judged, TensorDigests digests) throws IOException {
        String results = pretty(judged.json());
        AtomicWrite.string(dir.resolve(RESULTS), "the shard results", results);
        ObjectNode done = header(id, identity);
        done.put("layers_judged", fmt(judged.layers().stream().map(Judged.Layer::layer).toList()));
        done.put("logits_judged", !judged.logits().isEmpty());
        done.put("experts_judged", String.join(",", judged.experts().stream().map(Judged.Experts::range).toList()));
        done.put("plan_sha256", Identity.sha256(bytes(dir.resolve(PLAN))));
        done.put("results_sha256", Identity.sha256(results.getBytes(StandardCharsets.UTF_8)));
        done.set("tensor_digests", digests.json());
        done.put("finished", java.time.Instant.now().toString());
        AtomicWrite.string(dir.resolve(DONE), "the completion marker", pretty(done));
    }

    /** What the plan and the marker both start with: the format, the shard and the run's identity. */
    private static ObjectNode header(ShardId id, Identity identity) {
        ObjectNode o = StrictJson.MAPPER.createObjectNode();
        o.put("format", FORMAT);
        o.put("format_version", VERSION);
        o.put("shard", id.index());
        o.put("of", id.count());
        identity.put(o.putObject("identity"));
        return o;
    }

    /** Reads a folder; null when it holds no plan and its name is not a shard's (not a shard folder at all). */
    public static Read read(Path dir) {
        String name = dir.getFileName().toString();
        ShardId named = named(name);
        Path planFile = dir.resolve(PLAN);
        if (Files.isSymbolicLink(dir)) return named == null ? null : new Read(dir, named, null, List.of(), false, List.of(), null, "a symbolic link, not a shard's own folder: refused unread");
        if (!Files.exists(planFile, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return named == null ? null : new Read(dir, named, null, List.of(), false, List.of(), null, "no " + PLAN + " (never started)");
        JsonNode plan;
        ShardId id;
        Identity identity;
        List<Integer> layers;
        boolean logits;
        List<WorkPlan.ExpertRange> experts = new java.util.ArrayList<>();
        byte[] planBytes;
        try {
            planBytes = bytes(planFile);
            plan = StrictJson.read(planBytes);
            String where = planFile.toString();
            format(plan, where);
            java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
            id = new ShardId(StrictJson.int32(StrictJson.need(plan, "shard", where, bad), where + " shard", bad), StrictJson.int32(StrictJson.need(plan, "of", where, bad), where + " of", bad));
            identity = Identity.read(StrictJson.need(plan, "identity", where, bad), where + " identity");
            String ls = StrictJson.text(plan, "layers", where, bad);
            layers = ls.equals("-") || ls.isEmpty() ? List.of() : LayerSelection.parse(ls, k3j.config.ModelConfig.MAX_LAYERS);
            logits = StrictJson.bool(plan, "logits", where, bad);
            String ex = StrictJson.text(plan, "experts", where, bad);
            if (!ex.isEmpty()) for (String r : ex.split(",")) experts.add(WorkPlan.ExpertRange.parse(r));
        } catch (IOException | RuntimeException e) {
            return  new Read(dir, named, null, List.of(), false, List.of(), null, "unreadable " + PLAN + ": " + e.getMessage());
        }
        Path doneFile = dir.resolve(DONE);
        if (!Files.exists(doneFile, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return new Read(dir, id, identity, layers, logits, experts, null, "unfinished: no completion marker " + DONE);
        try {
            String where = doneFile.toString();
            java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
            JsonNode done = StrictJson.read(bytes(doneFile));
            format(done, where);
            if (StrictJson.int32(StrictJson.need(done, "shard", where, bad), where, bad) != id.index() || StrictJson.int32(StrictJson.need(done, "of", where, bad), where, bad) != id.count()) {
                throw new IllegalArgumentException(where + " names another shard than its " + PLAN);
            }
            List<String> differ = identity.differences(Identity.read(StrictJson.need(done, "identity", where, bad), where + " identity"));
            if (!differ.isEmpty()) throw new IllegalArgumentException(where + ": its " + String.join(", ", differ) + " differ from its " + PLAN);
            if (!Identity.sha256(planBytes).equals(StrictJson.text(done, "plan_sha256", where, bad))) throw new IllegalArgumentException(PLAN + " changed after the shard finished");
            byte[] resultBytes = bytes(dir.resolve(RESULTS));
            if (!Identity.sha256(resultBytes).equals(StrictJson.text(done, "results_sha256", where, bad))) throw new IllegalArgumentException(RESULTS + " is not the one the marker names (changed or cut short)");
            Judged judged = Judged.read(StrictJson.read(resultBytes), dir.resolve(RESULTS).toString());
            List<Integer> got = judged.layers().stream().map(Judged.Layer::layer).toList();
            if (!got.equals(layers)) throw new IllegalArgumentException(RESULTS + " judges layers " + fmt(got) + ", its plan " + fmt(layers));
            if (logits != (judged.greedy() != null)) throw new IllegalArgumentException(RESULTS + (logits ? " lacks the logit part its plan holds" : " holds logits its plan does not"));
            List<WorkPlan.ExpertRange> swept = judged.experts().stream().map(e -> new WorkPlan.ExpertRange(e.layer(), e.from(), e.to())).toList();
            if (!swept.equals(experts)) throw new IllegalArgumentException(RESULTS + " sweeps experts " + swept.stream().map(WorkPlan.ExpertRange::text).toList()
                    + ", its plan " + experts.stream().map(WorkPlan.ExpertRange::text).toList());
            TensorDigests digests = TensorDigests.of(StrictJson.object(done, "tensor_digests", where, bad), where + " tensor_digests");
            return new Read(dir, id, identity, layers, logits, experts, judged, digests, null);
        } catch (IOException | RuntimeException e) {
            return new Read(dir, id, identity, layers, logits, experts, null, "unfinished: " + e.getMessage());
        }
    }

    /** The shard a folder's name says it is ({@code shard-3-of-8}), or null. */
    static ShardId named(String name) {
        var m = java.util.regex.Pattern.compile("shard-(\\d{1,4})-of-(\\d{1,4})").matcher(name);
        if (!m.matches()) return null;
        try {
            return new ShardId(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)));
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    static String fmt(List<Integer> layers) {
        return layers.isEmpty() ? "none" : LayerSelection.format(layers);
    }

    private static void format(JsonNode o, String where) {
        java.util.function.Function<String, RuntimeException> bad = IllegalArgumentException::new;
        if (!FORMAT.equals(StrictJson.text(o, "format", where, bad)) || StrictJson.integer(o, "format_version", where, bad) != VERSION) {
            throw new IllegalArgumentException(where + ": not a " + FORMAT + " v" + VERSION + " file");
        }
    }

    /** A shard file: a regular file (a FIFO would hang the merge; a link is not the shard's own), its size checked before it is read. */
    private static byte[] bytes(Path p) throws IOException {
        if (Files.isSymbolicLink(p)) throw new IOException(p + " is a symbolic link: a shard's files are its own, refused unread");
        return SafeFiles.readAll(p, MAX_FILE_BYTES, "a shard file");
    }

    public static String pretty(JsonNode n) throws IOException {
        return StrictJson.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(n) + "\n";
    }
}
