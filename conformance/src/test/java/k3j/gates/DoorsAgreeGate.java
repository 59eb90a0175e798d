package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Consumer;
import java.util.function.Function;
import k3j.api.CannotJudge;
import k3j.api.Conform;
import k3j.cli.K3;
import k3j.dump.ReferenceDump;
import k3j.harness.CandidateFixture;
import k3j.harness.CheckpointItems;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.model.Assembly;
import k3j.verdict.Verdict;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every door that can judge a candidate gives the one verdict (docs/semantics.md §10.11): generated candidates of the
 * 93-layer oracle's reference (a perfect port, and one seeded fault of each kind the invariants name: a stage off by a
 * binding-size error, logits scaled by a constant, a non-finite stage or logit, a missing stage, layer or logits
 * array, another prompt, an extra array) go through {@code k3 conform} (float32 and {@code --lossy}),
 * {@code k3 compare-logits} on the candidate folder, on its one-file {@code .npz} and on its bare logits {@code .npy},
 * {@code k3 conform --against} a perfect port, the API ({@link Conform}), the verdict file a {@code -Pcandidate} run
 * writes ({@link CheckpointItems#candidateRun}: the gates' own judging and the run's plan, in this JVM) and the headline
 * and first divergence the report renders from it ({@code node ci/report-story.mjs headline}). Each door's outcome is the one its evidence
 * decides: the doors that see the layers and the logits give conform's outcome; a door that sees the logits alone
 * (compare-logits, and --against, which judges the layers alone) gives conform's outcome over that evidence, never a
 * pass for evidence it did not see; lossy speaks its own words for the same classes (REFUSED and INCOMPLETE exactly
 * as float32). The shard merge judges k3j's own run of a model, not a candidate: its cases (the 13-layer oracle clean
 * and with a binding swapped, each with and without a shard never run) go through the one-machine {@code k3 conform},
 * {@code k3 conform --merge} of its shards and the headline ci/report renders from that merge. Planted doors with rules
 * of their own are caught: one that counts failing layers (the rule of the old summary line), a Maven verdict from its
 * cases' statuses alone (a missing stage a failure), a merge and a report that read INCOMPLETE as CONFORMS.
 */
@Tag("verdict")
@Epic("verdicts")
class DoorsAgreeGate {
    static final String LAYERS = "40-52";
    static final int FAULT_LAYER = 45;
    static final long SEED = 38;

    enum Door { CONFORM, CONFORM_JSON, LOSSY, COMPARE_FOLDER, COMPARE_NPZ, COMPARE_NPY, AGAINST, API, MAVEN, REPORT }

    /** A case: its fault, planted in a perfect port, and the outcome each door must give (a door absent does not apply). */
    record Case(String name, Consumer<CandidateFixture> plant, Map<Door, Verdict.Outcome> expected) {}

    static ReferenceDump ref;
    static String dump;

    @TempDir
    static Path tmp;

    static Path perfect;

    @BeforeAll
    static void reference() throws IOException {
        Path d = Project.dump("mini-k3-93");
        ref = ReferenceDump.open(d);
        dump = d.toString();
        perfect = CandidateFixture.perfect(ref).writeFolder(tmp.resolve("perfect"));
    }

    static Map<Door, Verdict.Outcome> doors(Verdict.Outcome layersAndLogits, Verdict.Outcome lossy, Verdict.Outcome logitsOnly, Verdict.Outcome bareLogits,
                                            Verdict.Outcome layersOnly) {
        Map<Door, Verdict.Outcome> m = new EnumMap<>(Door.class);
        m.put(Door.CONFORM, layersAndLogits);
        m.put(Door.CONFORM_JSON, layersAndLogits);
        m.put(Door.API, layersAndLogits);
        m.put(Door.LOSSY, lossy);
        m.put(Door.COMPARE_FOLDER, logitsOnly);
        m.put(Door.COMPARE_NPZ, logitsOnly);
        if (bareLogits != null) m.put(Door.COMPARE_NPY, bareLogits);
        m.put(Door.AGAINST, layersOnly);
        m.put(Door.MAVEN, layersAndLogits);
        m.put(Door.REPORT, layersAndLogits);
        return m;
    }

    static String stage(String s) {
        return "layers." + FAULT_LAYER + "." + s;
    }

    static final Verdict.Outcome OK = Verdict.Outcome.CONFORMS, FAIL = Verdict.Outcome.DOES_NOT_CONFORM, INCOMPLETE = Verdict.Outcome.INCOMPLETE,
            REFUSED = Verdict.Outcome.REFUSED, WITHIN = Verdict.Outcome.WITHIN, OUTSIDE = Verdict.Outcome.OUTSIDE;

    static List<Case> cases() {
        SplittableRandom r = new SplittableRandom(SEED);
        int row = r.nextInt(ref.ids().length);
        return List.of(
                new Case("a perfect port", c -> {}, doors(OK, WITHIN, OK, OK, OK)),
                new Case("L45 attn_out times 1.5 (a binding-size error)", c -> scale(c.f32(stage("attn_out")), 1.5f), doors(FAIL, OUTSIDE, OK, OK, FAIL)),
                new Case("logits times 1.001 (a wrong constant)", c -> {
                    scale(c.f32("logits"), 1.001f);
                    scale(c.f32("logits_incremental"), 1.001f);
                }, doors(FAIL, WITHIN, FAIL, FAIL, OK)),
                new Case("a NaN in L45 mlp_out", c -> c.f32(stage("mlp_out"))[r.nextInt(c.f32(stage("mlp_out")).length)] = Float.NaN, doors(REFUSED, REFUSED, OK, OK, REFUSED)),
                new Case("an infinite logit at row " + row, c -> c.f32("logits")[row * ref.shape("logits")[1]] = Float.POSITIVE_INFINITY, doors(REFUSED, REFUSED, REFUSED, REFUSED, OK)),
                new Case("L45 mlp_out missing", c -> c.arrays.remove(stage("mlp_out")), doors(INCOMPLETE, INCOMPLETE, OK, OK, INCOMPLETE)),
                new Case("every array of L45 missing", c -> c.arrays.keySet().removeIf(k -> k.startsWith("layers." + FAULT_LAYER + ".")),
                        doors(INCOMPLETE, INCOMPLETE, OK, OK, INCOMPLETE)),
                new Case("the logits and greedy ids missing", c -> {
                    c.arrays.remove("logits");
                    c.arrays.remove("logits_incremental");
                    c.arrays.remove("greedy_ids");
                }, doors(INCOMPLETE, INCOMPLETE, INCOMPLETE, null, OK)),
                new Case("a manifest naming another prompt", c -> {
                    var ids = ((com.fasterxml.jackson.databind.node.ObjectNode) c.manifest.get("reference")).putArray("ids");
                    int[] want = ref.ids();
                    for (int i = 0; i < want.length; i++) ids.add(i == row ? want[i] + 1 : want[i]);
                }, doors(REFUSED, REFUSED, REFUSED, OK, REFUSED)),
                new Case("an extra array logits2", c -> c.arrays.put("logits2", c.arrays.get("logits").copy()), doors(REFUSED, REFUSED, REFUSED, OK, REFUSED)));
    }

    static void scale(float[] a, float by) {
        for (int i = 0; i < a.length; i++) a[i] *= by;
    }

    /** One door's outcome on a written candidate: what it printed on its VERDICT line, REFUSED for a refusal exiting 2 before any. */
    record Seen(Verdict.Outcome outcome, int exit, String output) {}

    static Seen k3(String... args) {
        StringWriter s = new StringWriter();
        PrintWriter w = new PrintWriter(s, true);
        int exit = K3.execute(w, w, Assembly.Intercepts.NONE, args);
        String out = s.toString();
        return new Seen(outcome(out, exit), exit, out);
    }

    static Verdict.Outcome outcome(String output, int exit) {
        String line = null;
        for (String l : output.split("\n")) if (l.startsWith("VERDICT: ")) line = l.substring("VERDICT: ".length());
        if (line == null) return exit == 2 && output.contains("refused") ? REFUSED : null;
        String words = line;
        return java.util.Arrays.stream(Verdict.Outcome.values()).filter(o -> words.startsWith(o.words())).max(Comparator.comparingInt(o -> o.words().length())).orElse(null);
    }

    static Seen door(Door d, Path folder, Path npz, Path npy) {
        return switch (d) {
            case CONFORM -> {
                deleteQuietly(folder.resolveSibling(CONFORM_JSON));
                yield k3("conform", "--candidate", folder.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1", "--json", folder.resolveSibling(CONFORM_JSON).toString());
            }
            case CONFORM_JSON -> json(folder.resolveSibling(CONFORM_JSON));
            case LOSSY -> k3("conform", "--candidate", folder.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1", "--lossy");
            case COMPARE_FOLDER -> k3("compare-logits", folder.toString(), "--reference", dump);
            case COMPARE_NPZ -> k3("compare-logits", npz.toString(), "--reference", dump);
            case COMPARE_NPY -> k3("compare-logits", npy.toString(), "--reference", dump);
            case AGAINST -> k3("conform", "--candidate", folder.toString(), "--against", perfect.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1");
            case API -> api(folder);
            case MAVEN -> maven(folder);
            case REPORT -> headline(folder.resolveSibling(MAVEN_RESULTS));
        };
    }

    static final String MAVEN_RESULTS = "maven-results", CONFORM_JSON = "conform.json";

    /**
     * The verdict {@code k3 conform --json} wrote beside its VERDICT line (the CONFORM door's run): its outcome. A run
     * refused before anything was graded writes none: REFUSED, as its exit says, only when the door's own exit said so.
     */
    static Seen json(Path file) {
        if (!Files.isRegularFile(file)) return new Seen(null, -1, "k3 conform --json wrote no " + file);
        try {
            var v = new com.fasterxml.jackson.databind.ObjectMapper().readTree(file.toFile()).path("verdict");
            String outcome = v.path("outcome").asText("");
            return new Seen(outcome.isEmpty() ? null : Verdict.Outcome.valueOf(outcome), v.path("exit_code").asInt(-1), v.toString());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The verdict file a {@code -Pcandidate} run of the layer and logit gates writes (its outcome), made in this JVM by
     * the functions those gates and their run's plan use ({@link CheckpointItems#candidateRun}), into the case's
     * {@value #MAVEN_RESULTS}/ folder, where {@link Door#REPORT} renders it.
     */
    static Seen maven(Path folder) {
        Path results = folder.resolveSibling(MAVEN_RESULTS);
        try {
            deleteTree(results);
            Map<String, Object> v = CheckpointItems.candidateRun(folder, Path.of(dump), k3j.compare.LayerSelection.parse(LAYERS, ref.layerCount()), "doors", results);
            return new Seen(Verdict.Outcome.valueOf(String.valueOf(v.get("outcome"))), -1, String.valueOf(v));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The headline the report's first screen renders from a results folder's verdict file ({@code node ci/report-story.mjs headline}). */
    static Seen headline(Path results) {
        if (!Files.isDirectory(results)) return new Seen(null, -1, "no results folder " + results);
        try {
            Process p = reportStory("headline", results.toString()).start();
            String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).strip();
            if (!p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return new Seen(null, -1, "node ci/report-story.mjs headline did not end in 60 s");
            }
            String words = out.split("\t", 2)[0];
            Verdict.Outcome o = java.util.Arrays.stream(Verdict.Outcome.values()).filter(x -> x.words().equals(words)).findFirst().orElse(null);
            return new Seen(o, -1, "headline and first divergence: " + out + " (node exit " + p.exitValue() + ")");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /**
     * {@code node ci/report-story.mjs ARGS}, outside any run: without the K3_RUN_ID (or K3_RUN_IDS) that {@code ci/test}
     * exports, which would make the script render that run instead of the case's own.
     */
    static ProcessBuilder reportStory(String... args) {
        List<String> command = new java.util.ArrayList<>(List.of("node", Project.root().resolve("ci/report-story.mjs").toString()));
        command.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true);
        pb.environment().remove("K3_RUN_ID");
        pb.environment().remove("K3_RUN_IDS");
        return pb;
    }

    static void deleteTree(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (java.util.stream.Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(q);
        }
    }

    static Seen api(Path folder) {
        Conform.Options o = Conform.Options.DEFAULTS.withThreads(1).withReference(Path.of(dump), List.of());
        try (Conform c = Conform.candidate(folder, o)) {
            var report = c.report(k3j.compare.LayerSelection.parse(LAYERS, c.layerCount()), false);
            var decision = report.decision();
            return new Seen(Verdict.Outcome.valueOf(decision.outcome().name()), decision.exitCode(), decision.text());
        } catch (CannotJudge e) {
            return new Seen(e.finding() == k3j.verdict.Finding.REFERENCE_MISMATCH || e.finding() == k3j.verdict.Finding.NON_FINITE ? REFUSED : null, -1, e.getMessage());
        }
    }

    /** Every case through {@code doors} (a door given as null left out); the disagreements, one line each. */
    static List<String> disagreements(Function<Door, Function<Path[], Seen>> doors) throws IOException {
        List<String> bad = new ArrayList<>();
        int n = 0;
        for (Case k : cases()) {
            CandidateFixture c = CandidateFixture.perfect(ref);
            k.plant().accept(c);
            Path dir = tmp.resolve("case-" + n), folder = c.writeFolder(dir.resolve("folder")), npz = c.writeNpz(dir.resolve("candidate.npz"));
            Path npy = c.arrays.containsKey("logits") ? Files.write(dir.resolve("logits.npy"), CandidateFixture.npy(c.arrays.get("logits"))) : null;
            n++;
            StringBuilder ev = new StringBuilder();
            for (var e : k.expected().entrySet()) {
                Seen s = doors.apply(e.getKey()).apply(new Path[] {folder, npz, npy});
                if (s == null) continue;   // a door the caller left out
                ev.append(e.getKey()).append(": ").append(s.outcome()).append(" (expected ").append(e.getValue()).append(", exit ").append(s.exit()).append(")\n");
                if (s.outcome() != e.getValue()) bad.add(k.name() + ": " + e.getKey() + " gave " + s.outcome() + ", expected " + e.getValue() + "\n" + tail(s.output()));
                else if (s.exit() >= 0 && s.exit() != exitOf(e.getValue())) bad.add(k.name() + ": " + e.getKey() + " exited " + s.exit() + " for " + e.getValue());
                if (k.name().startsWith("logits times") && e.getValue() == FAIL && !s.output().contains("[wrong constant or formula]")) {
                    bad.add(k.name() + ": " + e.getKey() + " does not name the wrong constant\n" + tail(s.output()));
                }
            }
            Evidence.text(k.name(), ev.toString());
        }
        return bad;
    }

    /** The exit code of an outcome, as the verdict gives it. */
    static int exitOf(Verdict.Outcome o) {
        return switch (o) {
            case CONFORMS, WITHIN -> 0;
            case DOES_NOT_CONFORM, OUTSIDE -> 1;
            case REFUSED -> 2;
            case INCOMPLETE -> 3;
        };
    }

    static String tail(String s) {
        String[] l = s.split("\n");
        return String.join("\n", java.util.Arrays.copyOfRange(l, Math.max(0, l.length - 12), l.length));
    }

    @Test
    void everyDoorGivesTheOneVerdict() throws IOException {
        List<String> bad = disagreements(d -> p -> door(d, p[0], p[1], p[2]));
        assertTrue(bad.isEmpty(), bad.size() + " disagreement(s):\n" + String.join("\n\n", bad));
    }

    /**
     * The proof the comparison can fail: conform given its own rule (VERDICT from the layer lines alone: CONFORMS when no
     * layer line says FAIL, the rule of the old layers summary) disagrees on the cases with missing or refused evidence.
     */
    @Test
    void aDoorWithItsOwnRuleIsCaught() throws IOException {
        Function<Door, Function<Path[], Seen>> planted = d -> d != Door.CONFORM ? p -> door(d, p[0], p[1], p[2]) : p -> {
            Seen s = door(d, p[0], p[1], p[2]);
            boolean failing = s.output().lines().anyMatch(l -> l.matches("^L\\d+ .*\\bFAIL\\b.*"));
            return new Seen(failing ? FAIL : OK, -1, s.output());
        };
        List<String> bad = disagreements(planted);
        Evidence.text("the planted door's disagreements", String.join("\n\n", bad));
        assertFalse(bad.isEmpty(), "a door deciding by its own rule went unnoticed");
        assertTrue(bad.stream().anyMatch(b -> b.contains("CONFORM gave CONFORMS, expected INCOMPLETE")), "the missing stage passed by the planted rule is caught: " + bad);
    }

    /** The doors over k3j's own run of a model: the one-machine {@code k3 conform}, the merge of its shards, and the merge's report headline. */
    enum RunDoor { ONE_MACHINE, MERGE, MERGE_REPORT }

    /** A case of k3j's own run: the model, the shard never run (or none), and the outcome each door must give. */
    record RunCase(String name, String model, Integer missingShard, Map<RunDoor, Verdict.Outcome> expected) {}

    static final int SHARDS = 3;

    /** The 13-layer oracle, clean and with L5's q_proj and k_proj swapped ({@code k3 corrupt}), each judged whole and as {@value #SHARDS} shards. */
    static Map<String, Path> runModels() {
        synchronized (RUN_MODELS) {
            if (RUN_MODELS.isEmpty()) {
                Path clean = Project.fixture("tiny-k3"), broken = tmp.resolve("tiny-k3-swapped");
                Seen c = k3("corrupt", clean.toString(), broken.toString(), "--corruption", "swap:5:self_attn.q_proj.weight,self_attn.k_proj.weight");
                if (c.exit() != 0) throw new AssertionError("k3 corrupt exited " + c.exit() + ":\n" + c.output());
                RUN_MODELS.put("clean", clean);
                RUN_MODELS.put("swapped", broken);
                for (var m : RUN_MODELS.entrySet()) {
                    for (int i = 0; i < SHARDS; i++) {
                        Seen s = k3("conform", m.getValue().toString(), "--reference", runReference().toString(), "--threads", "1", "--shard", i + "/" + SHARDS,
                                "--results", tmp.resolve("shards-" + m.getKey()).toString());
                        if (s.exit() > 1) throw new AssertionError("shard " + i + " of " + m.getKey() + " exited " + s.exit() + ":\n" + s.output());
                    }
                }
            }
            return RUN_MODELS;
        }
    }

    static final Map<String, Path> RUN_MODELS = new java.util.LinkedHashMap<>();

    static Path runReference() {
        return Project.dump("tiny-k3");
    }

    static List<RunCase> runCases() {
        Map<RunDoor, Verdict.Outcome> ok = Map.of(RunDoor.ONE_MACHINE, OK, RunDoor.MERGE, OK, RunDoor.MERGE_REPORT, OK);
        Map<RunDoor, Verdict.Outcome> bad = Map.of(RunDoor.ONE_MACHINE, FAIL, RunDoor.MERGE, FAIL, RunDoor.MERGE_REPORT, FAIL);
        return List.of(new RunCase("the clean oracle", "clean", null, ok), new RunCase("L5 q_proj and k_proj swapped", "swapped", null, bad),
                new RunCase("the clean oracle, shard 1 never run", "clean", 1, Map.of(RunDoor.ONE_MACHINE, OK, RunDoor.MERGE, INCOMPLETE, RunDoor.MERGE_REPORT, INCOMPLETE)),
                new RunCase("L5 swapped, shard 2 never run", "swapped", 2, Map.of(RunDoor.ONE_MACHINE, FAIL, RunDoor.MERGE, INCOMPLETE, RunDoor.MERGE_REPORT, INCOMPLETE)));
    }

    /** One door's outcome on a run case; the one-machine run is made once per model. */
    static Seen runDoor(RunDoor d, RunCase k, int n) {
        Path model = runModels().get(k.model());
        Path dir = tmp.resolve("run-case-" + n);
        try {
            return switch (d) {
                case ONE_MACHINE -> ONE_MACHINE_SEEN.computeIfAbsent(k.model(), m -> k3("conform", model.toString(), "--reference", runReference().toString(), "--threads", "1"));
                case MERGE -> {
                    deleteTree(dir);
                    k3j.harness.FolderTrees.copy(tmp.resolve("shards-" + k.model()), dir.resolve("root"));
                    if (k.missingShard() != null) k3j.harness.FolderTrees.delete(dir.resolve("root/shard-" + k.missingShard() + "-of-" + SHARDS));
                    Path digests = tmp.resolve("digests-" + k.model() + ".json");
                    if (!Files.exists(digests)) k3("digest", model.toString(), "--out", digests.toString());
                    yield k3("conform", "--merge", dir.resolve("root").toString(), "--digests", digests.toString(), "--json", dir.resolve("merged.json").toString());
                }
                case MERGE_REPORT -> {
                    // ci/report's rendering of a shard root's merge: the merge's --json as a verdict file, its headline rendered
                    Path merged = dir.resolve("merged.json"), results = dir.resolve("merge-results");
                    if (!Files.isRegularFile(merged)) yield new Seen(null, -1, "the merge wrote no " + merged);
                    deleteTree(results);
                    Files.createDirectories(results);
                    Process p = reportStory("merged", merged.toString(), results.toString(), dir.resolve("root").toString()).start();
                    String out = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
                    if (!p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS) || p.exitValue() != 0) {
                        p.destroyForcibly();
                        yield new Seen(null, -1, "node ci/report-story.mjs merged failed: " + out);
                    }
                    yield headline(results);
                }
            };
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    static final Map<String, Seen> ONE_MACHINE_SEEN = new java.util.concurrent.ConcurrentHashMap<>();

    /** Every run case through {@code doors} (in door order: the merge before its report); the disagreements, one line each. */
    static List<String> runDisagreements(java.util.function.BiFunction<RunDoor, Integer, Function<RunCase, Seen>> doors) {
        List<String> bad = new ArrayList<>();
        List<RunCase> cases = runCases();
        for (int n = 0; n < cases.size(); n++) {
            RunCase k = cases.get(n);
            StringBuilder ev = new StringBuilder();
            for (RunDoor d : RunDoor.values()) {
                Verdict.Outcome want = k.expected().get(d);
                Seen s = doors.apply(d, n).apply(k);
                ev.append(d).append(": ").append(s.outcome()).append(" (expected ").append(want).append(", exit ").append(s.exit()).append(")\n");
                if (s.outcome() != want) bad.add(k.name() + ": " + d + " gave " + s.outcome() + ", expected " + want + "\n" + tail(s.output()));
                else if (s.exit() >= 0 && s.exit() != exitOf(want)) bad.add(k.name() + ": " + d + " exited " + s.exit() + " for " + want);
            }
            Evidence.text(k.name(), ev.toString());
        }
        return bad;
    }

    /**
     * k3j's own run of a model through the doors that judge it: {@code k3 conform} on one machine, {@code k3 conform
     * --merge} of its {@value #SHARDS} shards ({@code --shard I/N}), and the headline ci/report renders from that merge.
     * A merge missing a shard sees less: INCOMPLETE, never the one-machine pass or failure.
     */
    @Test
    void theShardMergeAndItsReportGiveTheOneVerdict() {
        List<String> bad = runDisagreements((d, n) -> k -> runDoor(d, k, n));
        assertTrue(bad.isEmpty(), bad.size() + " disagreement(s):\n" + String.join("\n\n", bad));
    }

    /**
     * The proof the merge's doors are held: a merge given its own rule (a shard never run is a gap in the evidence it
     * passes over: INCOMPLETE read as CONFORMS, the rule that once trusted the shards' own word) and a report that maps
     * INCOMPLETE to CONFORMS are each caught.
     */
    @Test
    void aMergeOrReportWithItsOwnRuleIsCaught() {
        for (RunDoor planted : List.of(RunDoor.MERGE, RunDoor.MERGE_REPORT)) {
            List<String> bad = runDisagreements((d, n) -> k -> {
                Seen s = runDoor(d, k, n);
                return d == planted && s.outcome() == INCOMPLETE ? new Seen(OK, -1, s.output()) : s;
            });
            Evidence.text("the planted " + planted + "'s disagreements", String.join("\n\n", bad));
            assertTrue(bad.stream().anyMatch(b -> b.contains("shard 1 never run: " + planted + " gave CONFORMS, expected INCOMPLETE")), planted + " mapping INCOMPLETE to CONFORMS went unnoticed: " + bad);
        }
    }

    /** The proof the Maven door is held: the rule of a run that read its cases' statuses only (a missing stage a failure) is caught. */
    @Test
    void aMavenVerdictFromStatusesAloneIsCaught() throws IOException {
        List<String> bad = disagreements(d -> d != Door.MAVEN ? p -> null : p -> {
            Seen s = door(d, p[0], p[1], p[2]);
            return s.outcome() == INCOMPLETE ? new Seen(FAIL, -1, s.output()) : s;
        });
        Evidence.text("the planted Maven door's disagreements", String.join("\n\n", bad));
        assertTrue(bad.stream().anyMatch(b -> b.contains("L45 mlp_out missing: MAVEN gave DOES_NOT_CONFORM, expected INCOMPLETE")), "the status-only Maven rule went unnoticed: " + bad);
    }
}
