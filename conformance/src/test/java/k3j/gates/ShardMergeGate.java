package k3j.gates;

import static k3j.harness.FolderTrees.copy;
import static k3j.harness.FolderTrees.delete;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: {@code k3 conform --merge ROOT} is never green on a missing, duplicated, unfinished or foreign shard, and a
 * complete merge gives the one-machine run's verdict: the same layers, ratios, causes (read from every layer together,
 * docs/semantics.md §10.10), first divergence and decision (docs/semantics.md §10.11). The 13-layer oracle and a {@code k3 corrupt} copy of it (L5 q_proj
 * and k_proj swapped) are each judged in one process and as 3 shard processes ({@code --shard I/3}); the clean run's
 * shard folders are then broken one way at a time, each the way a scheduler or a person leaves them: a shard never run,
 * its marker not written, its results cut short or edited after the marker, the judged layers fewer than its plan, a
 * copied folder claiming the same shard, a shard of the corrupt copy (another model), a shard of a 2-shard run (another N),
 * a shard of another build. Each merge must exit 3, say INCOMPLETE and name the layers not judged; an empty root too.
 */
@Tag("fleet")
@Epic("fleet")
class ShardMergeGate {
    static final ObjectMapper JSON = new ObjectMapper();
    static final int N = 3;
    static Path tmp, model, broken, reference;
    /** The per-tensor digest manifests ({@code k3 digest}) of the clean model and of its corrupt copy: every merge needs its model's. */
    static Path manifest, brokenManifest;

    @BeforeAll
    static void runShards() throws Exception {
        tmp = Files.createTempDirectory("k3-shard-merge");
        model = Project.fixture("tiny-k3");
        reference = Project.dump("tiny-k3");
        broken = tmp.resolve("broken-model");
        k3ok(0, "corrupt", model.toString(), broken.toString(), "--corruption", "swap:5:self_attn.q_proj.weight,self_attn.k_proj.weight");
        // the one-machine runs and the shards are independent single-threaded processes (as an array's tasks are): side by side
        List<List<String>> runs = new ArrayList<>();
        List<Integer> exits = new ArrayList<>();
        for (Path m : List.of(model, broken)) {
            String name = m == model ? "clean" : "broken";
            runs.add(List.of("conform", m.toString(), "--reference", reference.toString(), "--threads", "1", "--json", tmp.resolve(name + "-one.json").toString()));
            exits.add(m == model ? 0 : 1);
            for (int i = 0; i < N; i++) {
                runs.add(List.of("conform", m.toString(), "--reference", reference.toString(), "--threads", "1", "--shard", i + "/" + N, "--results", tmp.resolve(name).toString()));
                exits.add(m == model ? 0 : -1);
            }
        }
        // another N: shard 0 of a 2-shard run of the same model
        runs.add(List.of("conform", model.toString(), "--reference", reference.toString(), "--threads", "1", "--shard", "0/2", "--results", tmp.resolve("two").toString()));
        exits.add(-1);
        // the same model mounted at another path (a fleet node's mount): shard 1 of the clean run from there
        Path moved = tmp.resolve("elsewhere/tiny-k3");
        copy(model, moved);
        runs.add(List.of("conform", moved.toString(), "--reference", reference.toString(), "--threads", "1", "--shard", "1/" + N, "--results", tmp.resolve("moved").toString()));
        exits.add(0);
        manifest = tmp.resolve("tiny-k3.digests.json");
        brokenManifest = tmp.resolve("broken-model.digests.json");
        runs.add(List.of("digest", model.toString(), "--out", manifest.toString()));
        exits.add(0);
        runs.add(List.of("digest", broken.toString(), "--out", brokenManifest.toString()));
        exits.add(0);
        List<ChildJvm.Result> done = ChildJvm.k3All(runs);
        for (int i = 0; i < runs.size(); i++) exitOk(exits.get(i), done.get(i), runs.get(i).toArray(String[]::new));
    }

    @AfterAll
    static void clean() throws IOException {
        if (tmp != null) try (Stream<Path> s = Files.walk(tmp)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }

    @Test
    void aCompleteMergeGivesTheOneMachineVerdictOnTheCleanModelAndTheCorruptCopy() throws Exception {
        for (String name : List.of("clean", "broken")) {
            Allure.step(name, () -> {
                ChildJvm.Result r = merge(tmp.resolve(name), name.equals("clean") ? manifest : brokenManifest);
                assertEquals(name.equals("clean") ? 0 : 1, r.exit(), "merge of the " + name + " run:\n" + r.output());
                JsonNode one = JSON.readTree(tmp.resolve(name + "-one.json").toFile()), merged = JSON.readTree(tmp.resolve(name + ".merged.json").toFile());
                assertEquals(one.get("summary"), merged.get("summary"), "the summary object");
                assertEquals(layers(one), layers(merged), "every layer's finding, message, first divergence and ratios (every bit)");
                assertEquals(13, merged.get("layers").size(), "layers in the merged JSON");
                if (name.equals("broken")) {
                    assertTrue(r.output().contains("FIRST DIVERGENCE: L5 KDA"), "the corrupt copy's first divergence is L5:\n" + r.output());
                    // the cause is read from all 13 layers (the shard holding L5 saw 4 or 5 of them)
                    assertTrue(merged.get("layers").get(5).path("message").asText().contains("cause: localised: 1 of 13 selected layers"), merged.get("layers").get(5).toString());
                }
                assertTrue(r.output().contains(one.path("summary").path("layers_line").asText()), "the merge prints the one-machine verdict line");
            });
        }
    }

    @Test
    void theSameModelAtAnotherPathIsTheSameRun() throws Exception {
        Path root = tmp.resolve("case-moved");
        copy(tmp.resolve("clean"), root);
        delete(root.resolve("shard-1-of-3"));
        copy(tmp.resolve("moved/shard-1-of-3"), root.resolve("shard-1-of-3"));
        JsonNode plan = JSON.readTree(root.resolve("shard-1-of-3/plan.json").toFile());
        assertTrue(plan.path("model_path").asText().contains("elsewhere"), "the plan records where the shard read the model: " + plan);
        ChildJvm.Result r = merge(root);
        Evidence.text("merge with shard 1 read from another path", r.output());
        assertEquals(0, r.exit(), "a model's identity is its content, not its path:\n" + r.output());
        assertEquals(layers(JSON.readTree(tmp.resolve("clean-one.json").toFile())), layers(JSON.readTree(Path.of(root + ".merged.json").toFile())));
    }

    @Test
    void aPassingLayerWithANonFiniteValueIsNeverGreen() throws Exception {
        Path root = tmp.resolve("case-non-finite");
        copy(tmp.resolve("clean"), root);
        Path dir = root.resolve("shard-0-of-3");
        ObjectNode results = (ObjectNode) JSON.readTree(dir.resolve("results.json").toFile());
        ObjectNode stage = (ObjectNode) results.get("layers").get(0).get("stages").get(0);
        stage.put("max_abs_diff", Double.NaN);   // the finding and the line still say PASS: only the value is non-finite
        String text = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(results);
        Files.writeString(dir.resolve("results.json"), text);
        ObjectNode done = (ObjectNode) JSON.readTree(dir.resolve("done.json").toFile());
        done.put("results_sha256", sha256(text.getBytes(StandardCharsets.UTF_8)));
        Files.writeString(dir.resolve("done.json"), JSON.writeValueAsString(done));
        ChildJvm.Result r = merge(root);
        Evidence.text("merge with a NaN in a passing layer", r.output());
        assertEquals(2, r.exit(), "a non-finite value in a passing layer is refused (the verdict's exit 2):\n" + r.output());
        assertTrue(r.output().contains("VERDICT: REFUSED"), r.output());
        assertEquals("REFUSED", JSON.readTree(Path.of(root + ".merged.json").toFile()).path("summary").path("verdict").asText());
    }

    /**
     * The expert sweep shards by (layer, expert range): mini-k3-93's sweep in 2 shards (one MoE layer's experts split
     * between them) merges into every layer's line as a one-machine sweep prints it, and without shard 1 the merge is
     * INCOMPLETE naming its (layer, expert range)s.
     */
    @Test
    void theExpertSweepShardsByExpertRange() throws Exception {
        Path mini = Project.fixture("mini-k3-93"), miniDump = Project.dump("mini-k3-93"), root = tmp.resolve("sweep");
        for (int i = 0; i < 2; i++) {
            k3ok(0, "conform", mini.toString(), "--reference", miniDump.toString(), "--threads", "1", "--experts", "--no-logits", "--shard", i + "/2", "--results", root.toString());
        }
        Path miniManifest = tmp.resolve("mini-k3-93.digests.json");
        k3ok(0, "digest", mini.toString(), "--out", miniManifest.toString());
        ChildJvm.Result m = merge(root, miniManifest);
        Evidence.text("merge of the 2-shard sweep", m.output());
        assertEquals(0, m.exit(), m.output());
        JsonNode plan1 = JSON.readTree(root.resolve("shard-1-of-2/plan.json").toFile());
        String first = plan1.path("experts").asText().split(",")[0];
        WorkRange split = WorkRange.of(first);
        assertTrue(split.from() > 0, "shard 1 starts inside a layer's experts (the plan splits by expert range): " + first);
        // the split layer and its neighbours swept on one machine print the lines the merge prints
        String layers = (split.layer() - 1) + "-" + (split.layer() + 1);
        ChildJvm.Result one = ChildJvm.k3("conform", mini.toString(), "--reference", miniDump.toString(), "--threads", "1", "--experts", "--no-logits", "--layers", layers);
        assertEquals(0, one.exit(), one.output());
        for (int l = split.layer() - 1; l <= split.layer() + 1; l++) {
            String line = sweepLine(one.output(), l);
            assertTrue(line != null && line.contains("experts checked: 7 of 7"), "L" + l + " swept whole on one machine:\n" + one.output());
            assertEquals(line, sweepLine(m.output(), l), "L" + l + ": the merged sweep line");
        }
        delete(root.resolve("shard-1-of-2"));
        ChildJvm.Result r = merge(root, miniManifest);
        Evidence.text("the sweep without shard 1", r.output());
        assertEquals(3, r.exit(), r.output());
        List<String> notJudged = new ArrayList<>();
        JSON.readTree(Path.of(root + ".merged.json").toFile()).path("summary").path("not_judged").forEach(x -> notJudged.add(x.asText()));
        assertEquals(List.of(plan1.path("layers").asText(), "experts " + plan1.path("experts").asText()), notJudged, "shard 1's layers and expert ranges");
    }

    record WorkRange(int layer, int from) {
        static WorkRange of(String s) {
            var x = java.util.regex.Pattern.compile("L(\\d+):(\\d+)-\\d+").matcher(s);
            if (!x.matches()) fail("not an expert range: " + s);
            return new WorkRange(Integer.parseInt(x.group(1)), Integer.parseInt(x.group(2)));
        }
    }

    /** The sweep's line of layer {@code l} without its seconds, or null. */
    static String sweepLine(String output, int l) {
        return output.lines().filter(x -> x.matches("L" + l + " .*experts checked: .*")).map(x -> x.replaceAll("\\s+[0-9.]+ s$", "")).findFirst().orElse(null);
    }

    @Test
    void aMissingShardIsIncomplete() throws Exception {
        incomplete("shard 1 never ran", root -> delete(root.resolve("shard-1-of-3")), 1);
    }

    @Test
    void anUnfinishedShardIsIncomplete() throws Exception {
        incomplete("no completion marker", root -> delete(root.resolve("shard-1-of-3/done.json")), 1);
        incomplete("results cut short after the marker", root -> {
            Path r = root.resolve("shard-2-of-3/results.json");
            byte[] b = Files.readAllBytes(r);
            Files.write(r, java.util.Arrays.copyOf(b, b.length / 2));
        }, 2);
        incomplete("a finding edited after the marker", root -> {
            Path r = root.resolve("shard-0-of-3/results.json");
            String text = Files.readString(r), edited = text.replaceFirst("\"finding\" : \"CONFORMS\"", "\"finding\" : \"NEAR_TIE\"");
            if (edited.equals(text)) fail("no finding to edit in " + r);
            Files.writeString(r, edited);
        }, 0);
        incomplete("results judging fewer layers than the plan (marker consistent)", root -> {
            Path dir = root.resolve("shard-0-of-3");
            ObjectNode results = (ObjectNode) JSON.readTree(dir.resolve("results.json").toFile());
            ((com.fasterxml.jackson.databind.node.ArrayNode) results.get("layers")).remove(0);
            String text = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(results);
            Files.writeString(dir.resolve("results.json"), text);
            ObjectNode done = (ObjectNode) JSON.readTree(dir.resolve("done.json").toFile());
            done.put("results_sha256", sha256(text.getBytes(StandardCharsets.UTF_8)));
            Files.writeString(dir.resolve("done.json"), JSON.writeValueAsString(done));
        }, 0);
    }

    @Test
    void aDuplicatedShardIsIncomplete() throws Exception {
        incomplete("shard 1 copied beside itself", root -> copy(root.resolve("shard-1-of-3"), root.resolve("shard-1-of-3-rerun")), 1);
    }

    @Test
    void aForeignShardIsIncomplete() throws Exception {
        incomplete("shard 2 of the corrupt copy (another model)", root -> {
            delete(root.resolve("shard-2-of-3"));
            copy(tmp.resolve("broken/shard-2-of-3"), root.resolve("shard-2-of-3"));
        }, 2);
        incomplete("a shard of a 2-shard run mixed in (another N)", root -> copy(tmp.resolve("two/shard-0-of-2"), root.resolve("shard-0-of-2")), -1);
        incomplete("shard 1 of another build (plan and marker consistent)", root -> {
            Path dir = root.resolve("shard-1-of-3");
            ObjectNode plan = (ObjectNode) JSON.readTree(dir.resolve("plan.json").toFile());
            ((ObjectNode) plan.get("identity")).put("build", "0".repeat(64));
            String text = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(plan);
            Files.writeString(dir.resolve("plan.json"), text);
            ObjectNode done = (ObjectNode) JSON.readTree(dir.resolve("done.json").toFile());
            ((ObjectNode) done.get("identity")).put("build", "0".repeat(64));
            done.put("plan_sha256", sha256(text.getBytes(StandardCharsets.UTF_8)));
            Files.writeString(dir.resolve("done.json"), JSON.writeValueAsString(done));
        }, 1);
    }

    /**
     * What must be judged comes from the reference, never from the shards' word: every shard's plan and marker rewritten
     * to a plan without the last layer (the hashes recomputed, so every folder is consistent), the logit shard's results
     * with no logit blocks or without the incremental one. Each is INCOMPLETE, naming what the reference defines.
     */
    @Test
    void whatTheReferenceDefinesMustBeJudged() throws Exception {
        incomplete("every plan rewritten without layer 12 (markers recomputed)", root -> {
            List<Path> dirs;
            try (Stream<Path> s = Files.list(root)) {
                dirs = s.filter(Files::isDirectory).sorted().toList();
            }
            String oldPlan = JSON.readTree(dirs.getFirst().resolve("plan.json").toFile()).path("identity").path("plan").asText();
            String newPlan = oldPlan.replaceFirst("-12( |$)", "-11$1");
            if (newPlan.equals(oldPlan)) fail("no part ends at layer 12 in " + oldPlan);
            for (Path dir : dirs) {
                ObjectNode plan = (ObjectNode) JSON.readTree(dir.resolve("plan.json").toFile());
                ((ObjectNode) plan.get("identity")).put("plan", newPlan);
                if (plan.path("layers").asText().endsWith("-12")) plan.put("layers", plan.path("layers").asText().replaceFirst("-12$", "-11"));
                String planText = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(plan);
                Files.writeString(dir.resolve("plan.json"), planText);
                ObjectNode results = (ObjectNode) JSON.readTree(dir.resolve("results.json").toFile());
                com.fasterxml.jackson.databind.node.ArrayNode layers = (com.fasterxml.jackson.databind.node.ArrayNode) results.get("layers");
                for (int i = layers.size() - 1; i >= 0; i--) if (layers.get(i).path("layer").asInt() == 12) layers.remove(i);
                String resultsText = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(results);
                Files.writeString(dir.resolve("results.json"), resultsText);
                ObjectNode done = (ObjectNode) JSON.readTree(dir.resolve("done.json").toFile());
                ((ObjectNode) done.get("identity")).put("plan", newPlan);
                done.put("plan_sha256", sha256(planText.getBytes(StandardCharsets.UTF_8)));
                done.put("results_sha256", sha256(resultsText.getBytes(StandardCharsets.UTF_8)));
                Files.writeString(dir.resolve("done.json"), JSON.writeValueAsString(done));
            }
        }, -1, "the reference defines layer 12");
        for (String edit : List.of("no logit block", "no incremental block")) {
            incomplete("the logit shard's results with " + edit + " (marker recomputed)", root -> {
                Path dir = logitShard(root);
                ObjectNode results = (ObjectNode) JSON.readTree(dir.resolve("results.json").toFile());
                com.fasterxml.jackson.databind.node.ArrayNode logits = (com.fasterxml.jackson.databind.node.ArrayNode) results.get("logits");
                if (logits.size() != 2) fail("the logit shard holds " + logits.size() + " logit blocks, 2 expected");
                if (edit.equals("no logit block")) logits.removeAll();
                else logits.remove(1);
                String text = JSON.writerWithDefaultPrettyPrinter().writeValueAsString(results);
                Files.writeString(dir.resolve("results.json"), text);
                ObjectNode done = (ObjectNode) JSON.readTree(dir.resolve("done.json").toFile());
                done.put("results_sha256", sha256(text.getBytes(StandardCharsets.UTF_8)));
                Files.writeString(dir.resolve("done.json"), JSON.writeValueAsString(done));
            }, -1, "logits (incremental)");
        }
    }

    /**
     * Two copies of the model that differ only between the identity's sampled windows: the shard holding L5 run on a
     * copy with one byte of an L5 tensor changed past its first window is of "the same model" by the sampled identity,
     * yet its tensor digests differ from the logit shard's (which hashed every tensor) and from the manifest
     * ({@code k3 digest}): FOREIGN, INCOMPLETE, the tensor named. The copy judged alone fails L5.
     */
    @Test
    void aShardOfAnotherCopyIsForeignByItsTensorDigests() throws Exception {
        Path copy = tmp.resolve("unsampled/tiny-k3");
        copy(model, copy);
        k3j.io.TensorInfo victim = k3j.io.CheckpointIndex.open(copy).tensors().stream()
                .filter(t -> t.name().contains("layers.5.") && t.length() > 4 * k3j.fleet.Identity.SAMPLE_BYTES).findFirst().orElseThrow();
        try (var ch = java.nio.channels.FileChannel.open(victim.file(), java.nio.file.StandardOpenOption.READ, java.nio.file.StandardOpenOption.WRITE)) {
            java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(1);
            long at = victim.offset() + k3j.fleet.Identity.SAMPLE_BYTES + 1;   // past the first window, before the middle one
            ch.read(b, at);
            b.put(0, (byte) (b.get(0) ^ 0x40)).rewind();
            ch.write(b, at);
        }
        int holder = -1;
        for (int i = 0; i < N && holder < 0; i++) {
            String layers = JSON.readTree(tmp.resolve("clean/shard-" + i + "-of-" + N + "/plan.json").toFile()).path("layers").asText();
            if (!layers.equals("-") && k3j.compare.LayerSelection.parse(layers, 93).contains(5)) holder = i;
        }
        Path other = tmp.resolve("unsampled-run");
        k3ok(-1, "conform", copy.toString(), "--reference", reference.toString(), "--threads", "1", "--shard", holder + "/" + N, "--results", other.toString());
        int h = holder;
        incomplete("shard " + holder + " run on a copy differing between the sampled windows", root -> {
            delete(root.resolve("shard-" + h + "-of-" + N));
            copy(other.resolve("shard-" + h + "-of-" + N), root.resolve("shard-" + h + "-of-" + N));
        }, h, victim.name() + " (other bytes than the manifest's)");
        // the copy alone fails L5 (its changed byte is in a tensor L5 runs): the merge is not hiding a pass
        ChildJvm.Result alone = ChildJvm.k3("conform", copy.toString(), "--reference", reference.toString(), "--threads", "1", "--layers", "5", "--no-logits");
        assertEquals(1, alone.exit(), "the changed copy judged alone:\n" + alone.output());
    }

    /**
     * The manifest is required and is the model's: a merge without {@code --digests} is refused (exit 2, naming
     * {@code k3 digest}); the clean shards against the corrupt copy's manifest are foreign wherever they read the
     * swapped L5 tensors (L5's shard and the logit shard); a marker with one
     * tensor's digest left out vouches for nothing (foreign, naming the tensor).
     */
    @Test
    void aMergeJudgesTheShardsAgainstTheModelsDigestManifest() throws Exception {
        ChildJvm.Result none = ChildJvm.k3("conform", "--merge", tmp.resolve("clean").toString());
        Evidence.text("merge without --digests", none.output());
        assertEquals(2, none.exit(), none.output());
        assertTrue(none.output().contains("needs --digests FILE") && none.output().contains("k3 digest MODEL --out FILE"), none.output());
        Allure.step("the clean shards against the corrupt copy's manifest", () -> {
            Path root = tmp.resolve("case-other-manifest");
            copy(tmp.resolve("clean"), root);
            ChildJvm.Result r = merge(root, brokenManifest);
            Evidence.text("the clean shards against the corrupt copy's manifest", r.output());
            assertEquals(3, r.exit(), r.output());
            assertTrue(r.output().contains("(other bytes than the manifest's)"), r.output());
            // the copy differs in L5's q_proj and k_proj: every shard that read them (L5's and the logit shard) is foreign
            long readL5 = 0;
            for (int i = 0; i < N; i++) {
                JsonNode plan = JSON.readTree(tmp.resolve("clean/shard-" + i + "-of-" + N + "/plan.json").toFile());
                String layers = plan.path("layers").asText();
                if (plan.path("logits").asBoolean() || (!layers.equals("-") && k3j.compare.LayerSelection.parse(layers, 93).contains(5))) readL5++;
            }
            assertEquals(2, readL5, "the plan puts L5 and the logit part in two shards");
            assertEquals(readL5, r.output().lines().filter(l -> l.contains("FOREIGN     judged other tensor bytes") && l.contains("layers.5.self_attn.q_proj.weight (other bytes")).count(),
                    "every shard that read L5 is foreign:\n" + r.output());
        });
        int plain = -1;
        for (int i = 0; i < N && plain < 0; i++) {
            if (!JSON.readTree(tmp.resolve("clean/shard-" + i + "-of-" + N + "/plan.json").toFile()).path("logits").asBoolean()) plain = i;
        }
        int p = plain;
        String[] dropped = new String[1];
        incomplete("a marker with one tensor digest left out", root -> {
            Path done = root.resolve("shard-" + p + "-of-" + N + "/done.json");
            ObjectNode d = (ObjectNode) JSON.readTree(done.toFile());
            ObjectNode tensors = (ObjectNode) d.path("tensor_digests").path("tensors");
            dropped[0] = tensors.fieldNames().next();
            tensors.remove(dropped[0]);
            Files.writeString(done, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(d));
        }, p, "(judged, not in the shard's digests)");
    }

    /**
     * Shards judged against a reference k3j wrote ({@code --dump-reference}) merge to a verdict that carries that
     * reference's producer ("reference: k3j VERSION (BUILD), not torch"), never torch's; the clean torch run's merge
     * names torch.
     */
    @Test
    void theMergedVerdictCarriesTheReferencesProducer() throws Exception {
        Path torchRoot = tmp.resolve("case-producer-torch");
        copy(tmp.resolve("clean"), torchRoot);
        ChildJvm.Result t = merge(torchRoot);
        assertEquals(0, t.exit(), t.output());
        assertTrue(JSON.readTree(Path.of(torchRoot + ".merged.json").toFile()).path("summary").path("reference").asText().startsWith("reference: torch"), t.output());
        Path k3jRef = tmp.resolve("k3j-reference");
        String prompt = String.join(",", java.util.Arrays.stream(k3j.dump.ReferenceDump.open(reference).promptIds()).mapToObj(Integer::toString).toList());
        k3ok(0, model.toString(), "--ids", prompt, "--gen", "1", "--threads", "1", "--reference", reference.toString(), "--dump-reference", k3jRef.toString());
        Path root = tmp.resolve("k3j-run");
        for (int i = 0; i < 2; i++) k3ok(0, "conform", model.toString(), "--reference", k3jRef.toString(), "--threads", "1", "--shard", i + "/2", "--results", root.toString());
        ChildJvm.Result r = ChildJvm.k3("conform", "--merge", root.toString(), "--reference", k3jRef.toString(), "--digests", manifest.toString(), "--json", root + ".merged.json");
        Evidence.text("merge of shards judged against a k3j-written reference", r.output());
        assertEquals(0, r.exit(), r.output());
        String producer = JSON.readTree(Path.of(root + ".merged.json").toFile()).path("summary").path("reference").asText();
        assertTrue(producer.startsWith("reference: k3j ") && producer.endsWith(", not torch"), "the merged verdict names the k3j reference: '" + producer + "'\n" + r.output());
        assertTrue(r.output().lines().anyMatch(l -> l.startsWith("VERDICT:") && l.contains("not torch")) || r.output().contains(producer), "the printed verdict names it:\n" + r.output());
    }

    /** The folder of the shard that holds the logit part. */
    static Path logitShard(Path root) throws IOException {
        for (int i = 0; i < N; i++) {
            Path dir = root.resolve("shard-" + i + "-of-" + N);
            if (JSON.readTree(dir.resolve("plan.json").toFile()).path("logits").asBoolean()) return dir;
        }
        throw new AssertionError("no shard holds the logit part");
    }

    @Test
    void anEmptyRootIsIncomplete() throws Exception {
        Path empty = Files.createDirectories(tmp.resolve("empty"));
        ChildJvm.Result r = merge(empty);
        Evidence.text("merge of an empty root", r.output());
        assertEquals(3, r.exit(), "an empty root:\n" + r.output());
        assertTrue(r.output().contains("VERDICT: INCOMPLETE"), r.output());
    }

    interface Break {
        void apply(Path root) throws IOException;
    }

    /** A copy of the clean run's root broken by {@code how}: exit 3, INCOMPLETE, shard {@code shard}'s layers named (-1: any). */
    static void incomplete(String what, Break how, int shard) throws Exception {
        incomplete(what, how, shard, null);
    }

    /** {@link #incomplete(String, Break, int)}, the merge also saying {@code says}. */
    static void incomplete(String what, Break how, int shard, String says) throws Exception {
        Allure.step(what, () -> {
            Path root = tmp.resolve("case-" + what.replaceAll("[^a-z0-9]+", "-"));
            copy(tmp.resolve("clean"), root);
            how.apply(root);
            ChildJvm.Result r = merge(root);
            Evidence.text(what, r.output());
            assertEquals(3, r.exit(), what + ": the merge's exit\n" + r.output());
            assertTrue(r.output().contains("VERDICT: INCOMPLETE"), what + ":\n" + r.output());
            assertEquals(1, r.output().lines().filter(l -> l.startsWith("VERDICT:")).count(), what + ": one VERDICT line, the decision's\n" + r.output());
            if (says != null) assertTrue(r.output().contains(says), what + ": the merge names it (" + says + ")\n" + r.output());
            if (what.contains("(another model)")) assertTrue(r.output().contains("FOREIGN     its model differ"), what + ": named by its model's content\n" + r.output());
            JsonNode m = JSON.readTree(Path.of(root + ".merged.json").toFile());
            assertEquals("INCOMPLETE", m.path("summary").path("verdict").asText(), what);
            if (shard >= 0) {
                JsonNode plan = JSON.readTree(tmp.resolve("clean/shard-" + shard + "-of-3/plan.json").toFile());
                List<String> expected = new ArrayList<>();
                if (!plan.path("layers").asText().equals("-")) expected.add(plan.path("layers").asText());
                if (plan.path("logits").asBoolean()) expected.add("logits");
                List<String> notJudged = new ArrayList<>();
                m.path("summary").path("not_judged").forEach(x -> notJudged.add(x.asText()));
                assertEquals(expected, notJudged, what + ": the parts of shard " + shard + " are named as not judged");
            }
        });
    }

    /** The merge of {@code root} against the clean model's digest manifest. */
    static ChildJvm.Result merge(Path root) throws IOException, InterruptedException {
        return merge(root, manifest);
    }

    static ChildJvm.Result merge(Path root, Path digests) throws IOException, InterruptedException {
        return ChildJvm.k3("conform", "--merge", root.toString(), "--digests", digests.toString(), "--json", root + ".merged.json");
    }

    /** {@code k3 args}, which must exit {@code exit} (-1: 0 or 1, a verdict either way). */
    static void k3ok(int exit, String... args) throws IOException, InterruptedException {
        exitOk(exit, ChildJvm.k3(args), args);
    }

    static void exitOk(int exit, ChildJvm.Result r, String... args) {
        if (exit >= 0 ? r.exit() != exit : r.exit() > 1) fail("k3 " + String.join(" ", args) + " exited " + r.exit() + ":\n" + r.output());
    }

    /**
     * Each layer's JSON without its timing ("seconds", and the seconds in "line"); its "cause:" clause is kept: the merge
     * reads the causes from every shard's layers together, as the one-machine run does.
     */
    static List<String> layers(JsonNode run) {
        List<String> out = new ArrayList<>();
        for (JsonNode l : run.get("layers")) {
            ObjectNode o = l.deepCopy();
            o.remove("seconds");
            o.put("line", o.path("line").asText().replaceAll("\\s+[0-9.]+ s(\\s|$)", "$1"));
            out.add(o.toString());
        }
        return out;
    }

    static String sha256(byte[] b) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
