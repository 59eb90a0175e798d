package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
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
 * {@code k3 conform --against} a perfect port, and the API ({@link Conform}). Each door's outcome is the one its evidence
 * decides: the doors that see the layers and the logits give conform's outcome; a door that sees the logits alone
 * (compare-logits, and --against, which judges the layers alone) gives conform's outcome over that evidence, never a
 * pass for evidence it did not see; lossy speaks its own words for the same classes (REFUSED and INCOMPLETE exactly
 * as float32). The shard merge and the Maven verdict file judge k3j's own forward, not a candidate: ShardMergeGate and
 * RunPlan's own checks hold them. {@link #aDoorWithItsOwnRuleIsCaught} plants a door that counts failing layers (the
 * rule of the old summary line) and shows the comparison fails on it.
 */
@Tag("verdict")
@Epic("verdicts")
class DoorsAgreeGate {
    static final String LAYERS = "40-52";
    static final int FAULT_LAYER = 45;
    static final long SEED = 38;

    enum Door { CONFORM, LOSSY, COMPARE_FOLDER, COMPARE_NPZ, COMPARE_NPY, AGAINST, API }

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
        m.put(Door.API, layersAndLogits);
        m.put(Door.LOSSY, lossy);
        m.put(Door.COMPARE_FOLDER, logitsOnly);
        m.put(Door.COMPARE_NPZ, logitsOnly);
        if (bareLogits != null) m.put(Door.COMPARE_NPY, bareLogits);
        m.put(Door.AGAINST, layersOnly);
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
            case CONFORM -> k3("conform", "--candidate", folder.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1");
            case LOSSY -> k3("conform", "--candidate", folder.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1", "--lossy");
            case COMPARE_FOLDER -> k3("compare-logits", folder.toString(), "--reference", dump);
            case COMPARE_NPZ -> k3("compare-logits", npz.toString(), "--reference", dump);
            case COMPARE_NPY -> k3("compare-logits", npy.toString(), "--reference", dump);
            case AGAINST -> k3("conform", "--candidate", folder.toString(), "--against", perfect.toString(), "--reference", dump, "--layers", LAYERS, "--threads", "1");
            case API -> api(folder);
        };
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

    /** Every case through {@code doors}; the disagreements, one line each. */
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
}
