package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import k3j.api.CannotJudge;
import k3j.api.Conform;
import k3j.api.ConformReport;
import k3j.cli.K3;
import k3j.dump.ReferenceDump;
import k3j.harness.CandidateFixture;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.model.Assembly;
import k3j.verdict.Invariants;
import k3j.verdict.PlanVerdict;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * No line, exit code, JSON verdict or exception beside the one verdict (docs/semantics.md §10.11): one case per way a
 * door once spoke past the decision, each on a small adversarial candidate of the 93-layer oracle's reference or on
 * the oracle model itself. A case returns what it found wrong, or null.
 */
@Tag("verdict")
@Epic("verdicts")
class OneVerdictGate {
    /** Words a line that is not the decision must not carry. */
    static final List<String> PASS_WORDS = List.of("ALL LAYERS CONFORM", "EVERY EXPERT CONFORMS", "PASSED", "LAYERS CONFORM");

    static ReferenceDump ref;
    static String dump;
    static Path model;

    @TempDir
    static Path tmp;

    @BeforeAll
    static void reference() {
        Path d = Project.dump("mini-k3-93");
        ref = ReferenceDump.open(d);
        dump = d.toString();
        model = Project.fixture("mini-k3-93");
    }

    record Run(int exit, String output) {}

    static Run k3(String... args) {
        StringWriter s = new StringWriter();
        PrintWriter w = new PrintWriter(s, true);
        int exit = K3.execute(w, w, Assembly.Intercepts.NONE, args);
        return new Run(exit, s.toString());
    }

    static List<String> verdictLines(String out) {
        return out.lines().filter(l -> l.startsWith("VERDICT:")).toList();
    }

    /** A wrong-constant port: every MLA layer's attn_out (and the logits) scaled by 1.01, as a constant in the MLA code would. */
    static Path wrongConstant() throws IOException {
        CandidateFixture c = CandidateFixture.perfect(ref);
        for (int i = 0; i < ref.layerCount(); i++) {
            if (ref.layer(i).mixer().equals("MLA")) for (float[] a : List.of(c.f32("layers." + i + ".attn_out"))) for (int j = 0; j < a.length; j++) a[j] *= 1.01f;
        }
        return c.writeFolder(tmp.resolve("wrong-constant"));
    }

    static Path oneLayerWrong() throws IOException {
        CandidateFixture c = CandidateFixture.perfect(ref);
        float[] a = c.f32("layers.45.attn_out");
        for (int j = 0; j < a.length; j++) a[j] *= 1.5f;
        return c.writeFolder(tmp.resolve("one-layer-wrong"));
    }

    static Map<String, Callable<String>> cases() {
        Map<String, Callable<String>> m = new LinkedHashMap<>();
        m.put("ConformReport.verdict() is the decision's line, never a layers-only pass line", () -> {
            try (Conform c = Conform.candidate(oneLayerWrong(), Conform.Options.DEFAULTS.withThreads(1).withReference(Path.of(dump), List.of()))) {
                ConformReport r = c.report(List.of(44, 45, 46), false);
                if (!r.verdict().equals(r.decision().line())) return "verdict() " + r.verdict() + " is not the decision's " + r.decision().line();
                return r.verdict().startsWith("VERDICT: DOES NOT CONFORM") ? null : "verdict() under a failing layer: " + r.verdict();
            }
        });
        m.put("the layers summary and the expert lines are not the decision: one VERDICT line, no pass word beside it", () -> {
            Run run = k3("conform", "--candidate", wrongConstant().toString(), "--reference", dump, "--threads", "1", "--no-logits");
            List<String> v = verdictLines(run.output());
            if (v.size() != 1 || !v.getFirst().startsWith("VERDICT: DOES NOT CONFORM")) return "VERDICT lines " + v + "\n" + run.output();
            for (String w : PASS_WORDS) if (run.output().contains(w)) return "a pass word '" + w.strip() + "' beside DOES NOT CONFORM\n" + run.output();
            return run.exit() == 1 ? null : "exit " + run.exit();
        });
        m.put("an expert sweep with no MoE layer selected is not judged (conform)", () -> {
            Run run = k3("conform", model.toString(), "--reference", dump, "--layers", "0", "--experts", "--no-logits", "--threads", "1");
            return run.exit() == 3 && verdictLines(run.output()).equals(List.of("VERDICT: INCOMPLETE")) && run.output().contains("no MoE layer")
                    ? null : "exit " + run.exit() + "\n" + run.output();
        });
        m.put("an expert sweep with no MoE layer selected is not judged (bisect)", () -> {
            Run run = k3("bisect", model.toString(), "--reference", dump, "--layers", "0", "--experts", "--threads", "1");
            return run.exit() == 3 && verdictLines(run.output()).size() == 1 && verdictLines(run.output()).getFirst().startsWith("VERDICT: INCOMPLETE")
                    ? null : "exit " + run.exit() + "\n" + run.output();
        });
        m.put("--against exits by the one decision: a stage neither candidate holds is INCOMPLETE, never exit 0", () -> {
            CandidateFixture c = CandidateFixture.perfect(ref);
            c.arrays.remove("layers.45.mlp_out");
            Path a = c.writeFolder(tmp.resolve("against-a")), b = c.writeFolder(tmp.resolve("against-b"));
            Run run = k3("conform", "--candidate", a.toString(), "--against", b.toString(), "--reference", dump, "--threads", "1");
            return run.exit() == 3 && verdictLines(run.output()).getLast().startsWith("VERDICT: INCOMPLETE") ? null : "exit " + run.exit() + "\n" + run.output();
        });
        m.put("a dump's budget width is checked against its config on every path (compare-logits too)", () -> {
            Path copy = tmp.resolve("wide-budget");
            Files.createDirectories(copy);
            try (Stream<Path> files = Files.list(Path.of(dump))) {
                for (Path f : files.toList()) if (Files.isRegularFile(f)) Files.copy(f, copy.resolve(f.getFileName()));
            }
            ObjectMapper json = new ObjectMapper();
            ObjectNode manifest = (ObjectNode) json.readTree(copy.resolve("manifest.json").toFile());
            int vocab = ref.shape("logits")[1];
            ObjectNode logits = (ObjectNode) manifest.get("budget").get("logits");
            logits.put("width", vocab);
            if (logits.has("budget")) logits.put("budget", ref.budget().eps32() * Math.sqrt(vocab) * ref.budget().factor());
            json.writeValue(copy.resolve("manifest.json").toFile(), manifest);
            Path npy = Files.write(tmp.resolve("ref-logits.npy"), CandidateFixture.npy(CandidateFixture.perfect(ref).arrays.get("logits")));
            Run run = k3("compare-logits", npy.toString(), "--reference", copy.toString());
            return run.exit() == 2 && run.output().contains("budget.logits.width") ? null : "a logits width of V accepted: exit " + run.exit() + "\n" + run.output();
        });
        m.put("PlanVerdict keeps REFUSED and not judged apart", () -> {
            List<String> plan = List.of("L0", "L1");
            PlanVerdict refused = PlanVerdict.of(plan, Map.of("L0", Invariants.Item.pass("L0"), "L1", Invariants.Item.refused("L1", "a NaN")), true, true);
            PlanVerdict missing = PlanVerdict.of(plan, Map.of("L0", Invariants.Item.pass("L0")), true, true);
            return refused.outcome().equals("REFUSED") && missing.outcome().equals("INCOMPLETE") && refused.json().get("exit_code").equals(2)
                    ? null : refused.json() + " / " + missing.json();
        });
        m.put("a wrong-constant port's layer lines, logits and verdict all say [wrong constant or formula]", () -> {
            Run run = k3("conform", "--candidate", wrongConstant().toString(), "--reference", dump, "--threads", "1", "--no-logits");
            if (run.output().contains("[binding error]")) return "a [binding error] line in a wrong-constant port\n" + run.output();
            long named = run.output().lines().filter(l -> l.matches("^L\\d+ MLA.*FAIL.*\\[wrong constant or formula\\].*")).count();
            long mla = java.util.stream.IntStream.range(0, ref.layerCount()).filter(i -> ref.layer(i).mixer().equals("MLA")).count();
            return named == mla && verdictLines(run.output()).getFirst().equals("VERDICT: DOES NOT CONFORM [wrong constant or formula]")
                    ? null : named + " of " + mla + " MLA layer lines name the cause\n" + run.output();
        });
        m.put("the API throws only its own type, naming Options.withReference", () -> {
            CandidateFixture c = CandidateFixture.perfect(ref);
            ((ObjectNode) c.manifest.get("reference")).put("manifest_sha256", "0".repeat(64)).put("dir", tmp.resolve("nowhere").toString());
            Path lost = c.writeFolder(tmp.resolve("lost-reference"));
            try (Conform x = Conform.candidate(lost, Conform.Options.DEFAULTS.withThreads(1))) {
                return "a candidate of an unknown reference opened: " + x.layerCount();
            } catch (CannotJudge e) {
                return e.getMessage().contains("Conform.Options.withReference") && !e.getMessage().contains("--reference") ? null : e.getMessage();
            } catch (RuntimeException e) {
                return e.getClass().getName() + " escaped the API: " + e.getMessage();
            }
        });
        return m;
    }

    @Test
    void nothingSpeaksBesideTheVerdict() {
        List<String> bad = new ArrayList<>();
        cases().forEach((name, body) -> {
            String why;
            try {
                why = body.call();
            } catch (Exception e) {
                why = e.getClass().getName() + ": " + e.getMessage();
            }
            Evidence.text(name, why == null ? "holds" : why);
            if (why != null) bad.add(name + ": " + why);
        });
        assertTrue(bad.isEmpty(), String.join("\n\n", bad));
    }
}
