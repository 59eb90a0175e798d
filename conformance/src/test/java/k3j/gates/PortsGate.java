package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;
import k3j.compare.Charts;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.compare.LogitParity;
import k3j.compare.LossyLayers;
import k3j.compare.LossyReport;
import k3j.dump.ReferenceDump;
import k3j.harness.Caught;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.TorchPorts;
import k3j.harness.ZipParts;
import k3j.kernels.Workers;
import k3j.verdict.Finding;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: the harness judges ANY engine, not only k3j, from the activations it dumps. On the 93-layer oracle:
 * the torch reference run in float32 as a candidate conforms at every layer, stage and logit; each named
 * mutant of the reference (a plausible wrong port), written as a candidate, fails, and its first divergence is
 * the first layer and stage where the mutant acts (the MLA LoRA-norm eps read from the config, 1e-5 instead of
 * 1e-6: the first MLA layer, attention output); k3j's own candidate ({@code k3 MODEL --dump-activations})
 * judges exactly like the direct run; {@code k3 compare-logits} passes a good logit file and fails a bad one.
 * Engines' own forms: a one-file candidate (.safetensors, .npz) judges as its folder, verdict for verdict; a plain
 * .npy or raw reference logit vector gives the verdict of the dump it came from. Lossy ports: the torch reference's
 * bf16, int8 and int4 ports grade in that order by KL divergence, and an int4 port with one misbound layer is singled
 * out at that layer. Greedy ids that part say whether the reference was at a near-tie there.
 *
 * <p>Data: {@code -Dk3.candidates=DIR}, written by
 * {@code reference-dumps/torch/dump_candidate.py reference-dumps/mini-k3-93 --out DIR --all-mutants} (.ci/run
 * does it): DIR/float32, one folder per mutant of the dump's mutant table, the lossy ladder DIR/bf16, DIR/int8, DIR/int4,
 * DIR/int4-misbound, and one-file copies DIR/NAME.safetensors / DIR/NAME.npz of {@link #ONE_FILE}. A missing one FAILS.
 */
@Tag("ports")
@Epic("ports")
class PortsGate {
    static final String EPS_MUTANT = "mla_lora_config_eps";
    /** the candidates dump_candidate.py --all-mutants also writes as one file: conforming, failing, unbindable, lossy */
    static final List<String> ONE_FILE = List.of("float32", EPS_MUTANT, "layer_map_zero_based", "int4");
    /** the lossy ladder, most precise first */
    static final List<String> LADDER = List.of("float32", "bf16", "int8", "int4");

    @Test
    void theTorchFloat32CandidateConformsEverywhere() {
        Allure.feature("torch float32");
        try (Conformance c = candidate("float32")) {
            List<LayerReport> reports = layers(c);
            List<String> bad = reports.stream().filter(r -> !r.conforms()).map(LayerReport::line).toList();
            assertTrue(bad.isEmpty(), "layers that do not conform:\n" + String.join("\n", bad));
            for (boolean incremental : new boolean[] {false, true}) {
                LogitParity.Result p = c.teacherForcing(incremental);
                Evidence.text("logits, " + p.mode(), p.text());
                assertEquals(Finding.CONFORMS, p.finding(), p.mode() + ":\n" + p.text());
            }
            LogitParity.Greedy g = c.greedy();
            Evidence.text("greedy ids", g.text());
            assertTrue(g.equal(), g.text());
        }
    }

    static Stream<String> mutants() {
        return TorchPorts.mutants();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("mutants")
    void eachMutantFailsWhereItFirstActs(String mutant) {
        Evidence.caseName("mutant " + mutant);
        Allure.feature("torch mutants");
        try (Conformance c = candidate(mutant)) {
            JsonNode m = c.candidateDump().manifest().path("mutant");
            assertEquals(mutant, m.path("name").asText(), "the candidate's manifest names its mutant");
            Evidence.parameter("wrong", m.path("wrong").asText());
            JsonNode acts = m.path("acts_at");
            if (acts.isMissingNode() || acts.isNull()) fail("the candidate records no acts_at: the mutant changes nothing on this checkpoint");
            Divergence d = firstDivergence(c);
            (d.finding() == Finding.CONFORMS ? Caught.missed("torch mutant", mutant + ": " + m.path("wrong").asText())
                    : new Caught("torch mutant", mutant + ": " + m.path("wrong").asText(), d.layer(), d.stage(), d.finding().tag(), d.ratio())).attach();
            Evidence.parameter("acts at", (acts.path("layer").isNull() ? "model level" : "L" + acts.path("layer").asInt()) + " " + acts.path("stage").asText("(binding)"));
            Evidence.parameter("first divergence", d.toString());
            if (acts.path("layer").isNull()) {
                assertEquals("logits", acts.path("stage").asText());
                assertEquals(null, d.layer(), "a model-level mutant leaves every layer conforming: " + d);
                assertNotEquals(Finding.CONFORMS, d.finding(), "the logits must fail");
                return;
            }
            assertEquals(acts.path("layer").asInt(), d.layer(), "first failing layer: " + d);
            if (acts.path("stage").isNull()) {
                assertEquals(Finding.MISSING_STAGE, d.finding(), "a layer the port cannot bind has no stage: " + d);
            } else {
                assertEquals(acts.path("stage").asText(), d.stage(), "first failing stage: " + d);
            }
        }
    }

    @Test
    void theLoraNormEpsFromTheConfigFailsAtTheFirstMlaLayerOnTheAttentionOutput() {
        Allure.feature("torch mutants");
        try (Conformance c = candidate(EPS_MUTANT)) {
            int firstMla = reference().field("layer_map").asText().indexOf('M');
            Divergence d = firstDivergence(c);
            Evidence.parameter("first MLA layer", firstMla);
            Evidence.parameter("first divergence", d.toString());
            assertEquals(firstMla, d.layer(), d.toString());
            assertEquals("attn_out", d.stage(), d.toString());
            assertEquals(Finding.WRONG_FORMULA, d.finding(), "1e-5 for 1e-6 on every MLA layer is a wrong constant, not a binding: " + d);
        }
    }

    @Test
    void k3jsCandidateInEachFormJudgesExactlyLikeTheDirectRun(@TempDir Path tmp) throws Exception {
        Allure.feature("k3j candidate");
        Path model = Project.fixture("mini-k3-93"), out = tmp.resolve("k3j");
        String prompt = ints(reference().promptIds());
        ChildJvm.Result run = ChildJvm.k3(model.toString(), "--ids", prompt, "--gen", "1", "--threads", "1", "--dump-activations", out.toString());
        Evidence.text("k3 --dump-activations", run.output());
        assertEquals(0, run.exit(), run.output());
        try (Workers w = Workers.of(1);
             Conformance direct = Conformance.open(model, ReferenceDump.open(Project.dump("mini-k3-93")), w);
             Conformance cand = Conformance.candidate(out, null, List.of(Project.root().resolve("reference-dumps")))) {
            assertEquals(0, differingLayers(direct, cand), "layers whose candidate verdict or ratios differ from the direct run");
            for (boolean incremental : new boolean[] {false, true}) {
                assertEquals(direct.teacherForcing(incremental), cand.teacherForcing(incremental), incremental ? "incremental logits" : "full-recompute logits");
            }
            assertTrue(Arrays.equals(direct.greedy().engine(), cand.greedy().engine()), "greedy ids");
            Evidence.parameter("layers equal", direct.layerCount() + "/" + direct.layerCount());
            // --dump-activations writes the one-file forms too, judged as the folder
            for (String form : List.of("k3j.safetensors", "k3j.npz")) {
                ChildJvm.Result one = ChildJvm.k3(model.toString(), "--ids", prompt, "--gen", "1", "--threads", "1", "--dump-activations", tmp.resolve(form).toString());
                Evidence.text("k3 --dump-activations " + form, one.output());
                assertEquals(0, one.exit(), one.output());
                try (Conformance c = Conformance.candidate(tmp.resolve(form), Project.dump("mini-k3-93"), List.of())) {
                    assertEquals(0, differingLayers(cand, c), form + ": layers whose verdict or ratios differ from the folder's");
                    for (boolean incremental : new boolean[] {false, true}) assertEquals(cand.teacherForcing(incremental), c.teacherForcing(incremental), form + " logits");
                    assertTrue(Arrays.equals(cand.greedy().engine(), c.greedy().engine()), form + " greedy ids");
                }
            }
        }
    }

    @Test
    void compareLogitsPassesAGoodFileAndFailsABadOne(@TempDir Path tmp) throws Exception {
        Allure.feature("compare-logits");
        ReferenceDump ref = reference();
        String dump = Project.dump("mini-k3-93").toString();
        // good: k3j's own --dump-logits (the C engine's raw format) and the torch float32 candidate's [T, V] logits
        Path raw = tmp.resolve("k3j.logits");
        ChildJvm.Result run = ChildJvm.k3(Project.fixture("mini-k3-93").toString(), "--ids", ints(ref.promptIds()), "--gen", "1", "--threads", "1",
                "--dump-logits", raw.toString());
        assertEquals(0, run.exit(), run.output());
        expect(0, "VERDICT: CONFORMS", "k3 compare-logits (k3j --dump-logits)", raw.toString(), "--reference", dump);
        expect(0, "VERDICT: CONFORMS", "k3 compare-logits (torch float32 .npy)", candidates().resolve("logits-float32.npy").toString(), "--reference", dump, "--position", "11");
        // bad: the eps mutant's last-prompt row (.npy) and the same row as raw bytes
        expect(1, "VERDICT: DOES NOT CONFORM", "k3 compare-logits (eps mutant .npy)", candidates().resolve("logits-" + EPS_MUTANT + ".npy").toString(), "--reference", dump);
        Path badRaw = tmp.resolve("eps.logits");
        int v = ref.shape("logits")[1], np = ref.promptIds().length;
        float[] row = Arrays.copyOfRange(k3j.dump.CandidateDump.open(candidates().resolve(EPS_MUTANT)).logits(false), (np - 1) * v, np * v);
        ByteBuffer b = ByteBuffer.allocate(4 * v).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(row);
        Files.write(badRaw, b.array());
        expect(1, "first differing rank", "k3 compare-logits (eps mutant raw)", badRaw.toString(), "--reference", dump);
        // refused: one float short, and a NaN
        Files.write(tmp.resolve("short.logits"), Arrays.copyOf(b.array(), 4 * v - 4));
        expect(2, "refused", "k3 compare-logits (short file)", tmp.resolve("short.logits").toString(), "--reference", dump);
        b.putFloat(0, Float.NaN);
        Files.write(tmp.resolve("nan.logits"), b.array());
        expect(2, "non-finite", "k3 compare-logits (NaN)", tmp.resolve("nan.logits").toString(), "--reference", dump);
    }

    static Stream<String> oneFileForms() {
        return ONE_FILE.stream().flatMap(n -> Stream.of(n + ".safetensors", n + ".npz"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("oneFileForms")
    void aOneFileCandidateJudgesExactlyLikeItsFolder(String file) {
        Evidence.caseName("one file " + file);
        Allure.feature("one-file candidates");
        String folder = file.substring(0, file.lastIndexOf('.'));
        try (Conformance dir = candidate(folder); Conformance one = candidate(file)) {
            assertEquals(0, differingLayers(dir, one), "layers whose one-file verdict or ratios differ from the folder's");
            for (boolean incremental : new boolean[] {false, true}) {
                assertEquals(outcome(() -> dir.teacherForcing(incremental)), outcome(() -> one.teacherForcing(incremental)), incremental ? "incremental logits" : "logits");
            }
            assertEquals(outcome(() -> dir.greedy().text()), outcome(() -> one.greedy().text()), "greedy ids");
            LossyReport a = LossyReport.of(dir, all(dir.layerCount()), true), b = LossyReport.of(one, all(one.layerCount()), true);
            assertEquals(a.layers().json(), b.layers().json(), "the graded (--lossy) layers");
            assertEquals(a.logits().keySet(), b.logits().keySet(), "the graded logits arrays");
            a.logits().forEach((mode, l) -> assertEquals(l.json(), b.logits().get(mode).json(), "the graded logits, " + mode));
            assertEquals(a.missing().size(), b.missing().size(), "the logits arrays missing");
            Evidence.parameter("layers equal", dir.layerCount() + "/" + dir.layerCount());
        }
    }

    /** Layers whose verdict, ratios, message or routing differ between two runs of the same reference (each one is evidence). */
    static int differingLayers(Conformance x, Conformance y) {
        int differ = 0;
        for (int i = 0; i < x.layerCount(); i++) {
            LayerReport a = x.layer(i), b = y.layer(i);
            if (a.finding() != b.finding() || !a.ratios().equals(b.ratios()) || !a.message().equals(b.message())
                    || (a.routing() == null ? b.routing() != null : !a.routing().equals(b.routing()))) {
                differ++;
                Evidence.text("L" + i + " differs", a.line() + "\n" + b.line());
            }
        }
        return differ;
    }

    /** A comparison's result, or the finding of the refusal (a candidate without logits: missing stage), without the path that names the form. */
    static Object outcome(java.util.function.Supplier<?> s) {
        try {
            return s.get();
        } catch (k3j.verdict.ConformException e) {
            return e.finding();
        }
    }

    @Test
    void aOneFileCandidateIsRefusedWhereTheFolderWouldBe(@TempDir Path tmp) throws Exception {
        Allure.feature("one-file candidates");
        byte[] good = Files.readAllBytes(candidates().resolve("float32.safetensors"));
        // one byte after the last tensor, and a tensor header whose shape is not the reference's
        Path trailing = Files.write(tmp.resolve("trailing.safetensors"), Arrays.copyOf(good, good.length + 1));
        refused(trailing, "after the last tensor");
        Path wide = tmp.resolve("wide.npz");
        k3j.dump.CandidateDump f32 = k3j.dump.CandidateDump.open(candidates().resolve("float32"));
        try (var zin = new java.util.zip.ZipInputStream(Files.newInputStream(candidates().resolve("float32.npz")));
             var zout = new java.util.zip.ZipOutputStream(Files.newOutputStream(wide))) {
            for (var e = zin.getNextEntry(); e != null; e = zin.getNextEntry()) {
                byte[] b = zin.readAllBytes();
                if (e.getName().equals("layers.5.attn_out.npy")) b = npy(32, f32.stages(5, 16).attnOut(), false);   // [32, 20] for [16, 40]
                zout.putNextEntry(new java.util.zip.ZipEntry(e.getName()));
                zout.write(b);
                zout.closeEntry();
            }
        }
        refused(wide, "'layers.5.attn_out' has shape");
    }

    static Stream<Arguments> parserDifferentials() {
        String stage = "layers.5.attn_out.npy";
        return Stream.of(
                Arguments.of("an .npy header giving 'shape' twice (numpy reads the last, transposed)", stage, "given twice"),
                Arguments.of("an .npz whose central directory points at the stage 50x over (the local entries good)", stage, "after a gap from byte"),
                Arguments.of("an .npz without a central directory (the local entries good)", stage, "the central directory is missing"));
    }

    /** The torch float32 port (which conforms) as a file numpy and zipfile read otherwise than a lax reader: each must be refused. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("parserDifferentials")
    void aPortNumpyReadsOtherwiseIsCaught(String planted, String stage, String says, @TempDir Path tmp) throws Exception {
        Evidence.caseName("parser differential: " + planted);
        Allure.feature("parser differentials");
        byte[] zip = Files.readAllBytes(candidates().resolve("float32.npz"));
        byte[] npy = ZipParts.entry(zip, stage);
        byte[] bad = switch (says) {
            case "given twice" -> ZipParts.replaced(zip, stage, ZipParts.withHeader(npy, h -> h.replaceFirst("'shape': \\((\\d+), (\\d+)\\)(.*)\\}", "'shape': ($1, $2)$3 'shape': ($2, $1), }")));
            case "after a gap from byte" -> ZipParts.centralPointingElsewhere(zip, stage, ZipParts.scaled(npy, 50f));
            default -> ZipParts.withoutCentralDirectory(zip);
        };
        Path f = Files.write(tmp.resolve("float32-planted.npz"), bad);
        try (Conformance c = Conformance.candidate(f, Project.dump("mini-k3-93"), List.of())) {
            Caught.missed("parser differential", planted).attach();
            fail(planted + " was read: " + firstDivergence(c));
        } catch (k3j.verdict.ConformException e) {
            new Caught("parser differential", planted, null, stage, e.finding().tag(), null).attach();
            Evidence.text("refused", e.getMessage());
            assertEquals(Finding.REFERENCE_MISMATCH, e.finding(), e.getMessage());
            assertTrue(e.getMessage().contains(says), "should say '" + says + "': " + e.getMessage());
        }
    }

    static void refused(Path file, String fragment) {
        var e = org.junit.jupiter.api.Assertions.assertThrows(k3j.verdict.ConformException.class, () -> candidate(file.toString()).close(), file.toString());
        Evidence.text("refused " + file.getFileName(), e.getMessage());
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding(), e.getMessage());
        assertTrue(e.getMessage().contains(fragment), "should say '" + fragment + "': " + e.getMessage());
    }

    @Test
    void aPlainNpyReferenceGivesTheVerdictOfItsDump(@TempDir Path tmp) throws Exception {
        Allure.feature("plain reference logits");
        ReferenceDump ref = reference();
        String dump = Project.dump("mini-k3-93").toString(), model = Project.fixture("mini-k3-93").toString();
        int v = ref.shape("logits")[1], t = ref.ids().length, np = ref.promptIds().length;
        Path plain = Files.write(tmp.resolve("reference-logits.npy"), npy(t, ref.f32("logits"), false));
        Path row = tmp.resolve("reference-row.f32");
        Files.write(row, le(Arrays.copyOfRange(ref.f32("logits"), (np - 1) * v, np * v)));
        for (String cand : List.of("float32", EPS_MUTANT)) {
            Path all = Files.write(tmp.resolve(cand + "-all.npy"), npy(t, k3j.dump.CandidateDump.open(candidates().resolve(cand)).logits(false), false));
            String want = cand.equals("float32") ? "VERDICT: CONFORMS" : "VERDICT: DOES NOT CONFORM";
            int exit = cand.equals("float32") ? 0 : 1;
            String a = expect(exit, want, "k3 compare-logits " + cand + " (all rows) against the dump", all.toString(), "--reference", dump);
            String b = expect(exit, want, "k3 compare-logits " + cand + " (all rows) against the plain .npy", all.toString(), "--reference", plain.toString(), "--model", model);
            assertEquals(figures(a), figures(b), "the same figures against the dump and against its logits alone");
            String c = expect(exit, want, "k3 compare-logits " + cand + " (last prompt row) against the raw float32 row", all.toString(),
                    "--reference", row.toString(), "--config", model + "/config.json", "--position", String.valueOf(np - 1));
            String d = expect(exit, want, "k3 compare-logits " + cand + " (last prompt row) against the dump", all.toString(), "--reference", dump, "--position", String.valueOf(np - 1));
            assertEquals(figures(c), figures(d), "the same figures for one row against the dump and against the raw vector");
            assertTrue(b.contains("not checked"), "a plain reference says what it cannot check:\n" + b);
            assertTrue(b.contains("generated span argmax : not checked") && !b.contains("(prompt ") && !b.contains(" -1 "),
                    "a plain reference claims no prompt, span or ids it does not have:\n" + b);
        }
        expect(2, "needs --config", "k3 compare-logits (plain reference, no config)", plain.toString(), "--reference", plain.toString());
    }

    /** The figures and the verdict of compare-logits output (not the lines naming the files, the positions' ids or the budget's source). */
    static String figures(String output) {
        List<String> keep = List.of("max |diff|", "relative to max|ref|", "mean |diff|", "correlation", "top-10 overlap", "argmax", "first differing rank", "VERDICT");
        return output.lines().filter(l -> keep.stream().anyMatch(l::startsWith)).reduce("", (x, y) -> x + y + "\n");
    }

    @Test
    void theLossyLadderOrdersByPrecision(@TempDir Path tmp) throws Exception {
        Allure.feature("lossy ports");
        List<Double> kl = new ArrayList<>(), median = new ArrayList<>();
        StringBuilder table = new StringBuilder(String.format(Locale.ROOT, "%-10s %12s %12s %12s %12s %8s %10s%n", "port", "mean KL", "median KL", "p99 KL", "max KL", "top-1 %", "RMS dp %"));
        for (String port : LADDER) {
            try (Conformance c = candidate(port)) {
                LossyReport r = LossyReport.of(c, all(c.layerCount()), true);
                k3j.compare.LossyLogits l = r.logits().get("full recompute");
                kl.add(l.meanKl());
                median.add(l.medianKl());
                table.append(String.format(Locale.ROOT, "%-10s %12.4g %12.4g %12.4g %12.4g %8.2f %10.4f%n", port, l.meanKl(), l.medianKl(), l.p99Kl(), l.maxKl(), l.sameTop1(), 100 * l.rmsDeltaP()));
                Evidence.json("graded table " + port, r.json(null, null));
            }
        }
        Evidence.text("the ladder", table.toString());
        for (int i = 1; i < LADDER.size(); i++) {
            assertTrue(kl.get(i) > 2 * kl.get(i - 1), LADDER.get(i) + " must be well above " + LADDER.get(i - 1) + " in mean KL:\n" + table);
            assertTrue(median.get(i) > median.get(i - 1), LADDER.get(i) + " above " + LADDER.get(i - 1) + " in median KL:\n" + table);
        }
        // the thresholds decide the exit, and --json holds the whole table
        double between = Math.sqrt(kl.get(2) * kl.get(3));
        Path json = tmp.resolve("int4.json");
        ChildJvm.Result in = ChildJvm.k3("conform", "--candidate", candidates().resolve("int8").toString(), "--reference", Project.dump("mini-k3-93").toString(),
                "--lossy", "--max-kl", String.valueOf(between));
        Evidence.text("k3 conform --candidate int8 --lossy", in.output());
        assertEquals(0, in.exit(), in.output());
        assertTrue(in.output().contains("VERDICT: WITHIN THE THRESHOLDS"), in.output());
        ChildJvm.Result out = ChildJvm.k3("conform", "--candidate", candidates().resolve("int4.npz").toString(), "--reference", Project.dump("mini-k3-93").toString(),
                "--lossy", "--max-kl", String.valueOf(between), "--json", json.toString());
        Evidence.text("k3 conform --candidate int4.npz --lossy", out.output());
        assertEquals(1, out.exit(), out.output());
        assertTrue(out.output().contains("VERDICT: OUTSIDE THE THRESHOLDS"), out.output());
        JsonNode j = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json.toFile()).path("lossy");
        assertEquals(reference().layerCount(), j.path("layers").path("layers").size(), "every layer in the JSON table");
        assertEquals(reference().ids().length, j.path("logits").path("full recompute").path("rows").size(), "every position in the JSON table");
        assertEquals("outside", j.path("verdict").asText());
    }

    @Test
    void anInt4PortWithAMisboundLayerIsSingledOutAtThatLayer() {
        Allure.feature("lossy ports");
        double plainGrowth = 0;
        for (String healthy : List.of("bf16", "int4")) {
            try (Conformance c = candidate(healthy)) {
                LossyLayers plain = LossyLayers.of(c, all(c.layerCount()));
                plainGrowth = Math.max(plainGrowth, plain.worstGrowth());
                Evidence.text(healthy + ": graded layers", plain.text() + plain.worstLine());
                assertTrue(!plain.outlier() && plain.worstLine().startsWith("LARGEST ERROR GROWTH: none stands out"), "a healthy " + healthy + " port names no layer: " + plain.worstLine());
            }
        }
        try (Conformance c = candidate("int4-misbound")) {
            JsonNode acts = c.candidateDump().manifest().path("mutant").path("acts_at");
            if (!acts.path("layer").isInt()) fail("the candidate records no acts_at layer");
            LossyLayers l = LossyLayers.of(c, all(c.layerCount()));
            Evidence.text("int4 + misbound: graded layers", l.text() + l.worstLine());
            Evidence.parameter("singled out", l.worstLine());
            Evidence.parameter("acts at", "L" + acts.path("layer").asInt() + " " + acts.path("stage").asText());
            assertTrue(l.outlier(), "the misbound layer stands out by the outlier rule: " + l.worstLine());
            assertEquals(acts.path("layer").asInt(), l.worstLayer(), l.worstLine());
            assertEquals(acts.path("stage").asText(), l.worstStage(), l.worstLine());
            assertTrue(l.worstGrowth() > 2 * plainGrowth, "the misbound layer's growth must stand well above the healthy ports' largest (" + plainGrowth + "): " + l.worstLine());
        }
    }

    @Test
    void greedyIdsThatPartSayWhetherTheReferenceWasAtANearTie() {
        Allure.feature("greedy near-tie");
        // mini-k3-93: every greedy margin is thousands of times the logits' rounding bound, so parting ids are a real divergence
        ReferenceDump mini = reference();
        int[] ids = mini.generatedIds().clone();
        ids[2] = (ids[2] + 1) % mini.shape("logits")[1];
        LogitParity.Greedy real = LogitParity.greedy(mini, ids, List.of());
        Evidence.text("mini-k3-93, step 2 changed", real.text());
        assertEquals(2, real.firstDivergence());
        assertTrue(!real.nearTie() && real.text().contains("[real divergence]"), real.text());
        // near-tie-k3: the float32 run drifts past its greedy margins (margin_over_logit_drift < 1): either id is a correct float32 result
        ReferenceDump tie = ReferenceDump.open(Project.dump("near-tie-k3"));
        int[] other = tie.generatedIds().clone();
        other[0] = LogitParity.greedy(tie, new int[0], List.of()).referenceTop5().get(1).id();
        LogitParity.Greedy near = LogitParity.greedy(tie, other, List.of());
        Evidence.text("near-tie-k3, step 0 = the reference's second id", near.text());
        assertEquals(0, near.firstDivergence());
        assertTrue(near.nearTie() && near.text().contains("[near-tie]"), near.text());
    }

    static List<Integer> all(int layers) {
        return java.util.stream.IntStream.range(0, layers).boxed().toList();
    }

    static byte[] npy(int rows, float[] values, boolean oneRow) {
        int cols = values.length / rows;
        String shape = oneRow ? "(" + values.length + ",)" : "(" + rows + ", " + cols + ")";
        String dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
        int pad = (64 - (10 + dict.length() + 1) % 64) % 64;
        byte[] head = (dict + " ".repeat(pad) + "\n").getBytes(java.nio.charset.StandardCharsets.ISO_8859_1);
        ByteBuffer b = ByteBuffer.allocate(10 + head.length + 4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0}).putShort((short) head.length).put(head);
        b.asFloatBuffer().put(values);
        return b.array();
    }

    static byte[] le(float[] values) {
        ByteBuffer b = ByteBuffer.allocate(4 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(values);
        return b.array();
    }

    // ---------------------------------------------------------------------------------------------

    /** Where a candidate first departs: the first failing layer and its first failing stage, else the logits. */
    record Divergence(Integer layer, String kind, String stage, Finding finding, String message, double ratio) {
        @Override
        public String toString() {
            return (layer == null ? "model level" : "L" + layer + " " + kind) + " " + stage + " " + finding.tag() + (message.isEmpty() ? "" : ": " + message);
        }
    }

    static Divergence firstDivergence(Conformance c) {
        List<LayerReport> reports = layers(c);
        for (LayerReport r : reports) {
            if (!r.conforms()) {
                String first = r.firstDivergence();
                double ratio = r.stages().stream().filter(m -> m.stage().equals(first)).mapToDouble(k3j.compare.StageMetric::ratioToBudget).findFirst().orElse(r.worstRatioToBudget());
                return new Divergence(r.layer(), r.kind(), first, r.finding(), r.message(), ratio);
            }
        }
        LogitParity.Result p = c.teacherForcing(false);
        return new Divergence(null, "", "logits", p.finding(), String.format(Locale.ROOT, "%.3gx budget", p.ratioToBudget()), p.ratioToBudget());
    }

    static List<LayerReport> layers(Conformance c) {
        return TorchPorts.layers(c);
    }

    static String expect(int exit, String fragment, String what, String... args) throws Exception {
        ChildJvm.Result r = ChildJvm.k3(Stream.concat(Stream.of("compare-logits"), Arrays.stream(args)).toArray(String[]::new));
        Evidence.text(what, r.output());
        assertEquals(exit, r.exit(), what + ":\n" + r.output());
        assertTrue(r.output().contains(fragment), what + " should say '" + fragment + "':\n" + r.output());
        return r.output();
    }

    static Conformance candidate(String name) {
        return TorchPorts.candidate(name);
    }

    static Path candidates() {
        return TorchPorts.folder();
    }

    static ReferenceDump reference() {
        return TorchPorts.reference();
    }

    static String ints(int[] v) {
        return String.join(",", Arrays.stream(v).mapToObj(String::valueOf).toList());
    }
}
