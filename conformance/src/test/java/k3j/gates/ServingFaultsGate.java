package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.harness.Evidence;
import k3j.harness.FaultyServer;
import k3j.harness.Project;
import k3j.probe.Form;
import k3j.probe.Probe;
import k3j.probe.Prompt;
import k3j.probe.Prompts;
import k3j.probe.Reference;
import k3j.probe.Screen;
import k3j.provider.ProviderGrade;
import k3j.tokenizer.Tokenizer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: {@code k3 probe} tells a right server from a wrong one over real HTTP. Against a small OpenAI-compatible
 * server on loopback that computes its answers with k3j's forward on the tiny oracle ({@link FaultyServer}), the
 * probe says CONFORMS when nothing is planted, and DOES NOT CONFORM for each planted serving fault, the case named in
 * the manifest failing with its first divergence: batch-dependent logprobs and a KDA state shared across the batch
 * (alone against inside a batch), a stale prefix cache (after a request sharing its prefix), logprobs shifted by one
 * position (conformance), a chunked prefill that drops the conv state (a long prompt against its short prefix). A
 * server without the chat form leaves the run INCOMPLETE, unless the chat form is left out.
 *
 * <p>Data: oracle-fixtures/tiny-k3; the cases, the outcomes and the probe's settings in
 * k3j/gates/serving-faults.json.
 */
@Tag("serving-faults")
@Epic("probe")
class ServingFaultsGate {
    static final Path TINY = Project.fixture("tiny-k3");
    static Engine engine;
    static Reference reference;
    static Tokenizer tok;
    static JsonNode manifest;

    @BeforeAll
    static void open() throws Exception {
        manifest = Project.json(Path.of(ServingFaultsGate.class.getResource("serving-faults.json").toURI()));
        engine = Engine.open(TINY, Plan.resident(), Engine.Options.DEFAULTS.withThreads(1).withTokenizer(TINY).withReport(s -> {}, s -> {}));
        tok = Tokenizer.load(TINY);
        reference = Reference.model(TINY, TINY, Plan.resident(), 1, 512, s -> {});
    }

    @AfterAll
    static void close() {
        if (reference != null) reference.close();
        if (engine != null) engine.close();
    }

    static Stream<Arguments> cases() throws Exception {
        JsonNode m = Project.json(Path.of(ServingFaultsGate.class.getResource("serving-faults.json").toURI()));
        return java.util.stream.StreamSupport.stream(m.path("cases").spliterator(), false)
                .map(c -> Arguments.of(c.path("fault").asText() + (c.path("chat").asBoolean() ? "" : ", no chat form") + ", --forms " + c.path("forms").asText()
                        + (c.has("budget_nats") ? ", declared non-deterministic within " + c.path("budget_nats").asDouble() + " nats" : ""), c));
    }

    @org.junit.jupiter.api.Test
    @DisplayName("k3 probe prints the verdict and exits by it: 0 for the clean server, 1 for logprobs shifted by one position")
    void commandPrintsTheVerdict(@org.junit.jupiter.api.io.TempDir Path tmp) throws Exception {
        Allure.feature("serving faults");
        for (FaultyServer.Fault f : List.of(FaultyServer.Fault.NONE, FaultyServer.Fault.SHIFTED_LOGPROBS)) {
            try (FaultyServer server = new FaultyServer(engine, tok, f, true)) {
                java.io.StringWriter o = new java.io.StringWriter();
                Path json = tmp.resolve(f + ".json");
                int exit = k3j.cli.K3.execute(new java.io.PrintWriter(o, true), new java.io.PrintWriter(o, true), k3j.model.Assembly.Intercepts.NONE, "probe",
                        server.uri().toString(), "--model", TINY.toString(), "--threads", "1", "--random", "2", "--prompt-ids", "6", "--gen", "4", "--batch", "2",
                        "--long-gen", "6", "--json", json.toString());
                String screen = o.toString();
                Evidence.text("k3 probe against " + f, screen);
                JsonNode v = Project.json(json);
                if (f == FaultyServer.Fault.NONE) {
                    assertEquals(0, exit, screen);
                    assertTrue(screen.contains("\nVERDICT: CONFORMS\n"), screen);
                    assertEquals("CONFORMS", v.path("outcome").asText());
                } else {
                    assertEquals(1, exit, screen);
                    assertTrue(screen.contains("FIRST DIVERGENCE: conformance: p1 completions: outside the thresholds") && screen.contains("\nVERDICT: DOES NOT CONFORM\n"), screen);
                    assertEquals("DOES_NOT_CONFORM", v.path("outcome").asText());
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    @DisplayName("the probe against a server with a planted fault")
    void probeNamesThePlantedFault(String name, JsonNode c) throws Exception {
        Allure.feature("serving faults");
        JsonNode p = manifest.path("probe");
        Set<Form> forms = EnumSet.noneOf(Form.class);
        for (String f : c.path("forms").asText().split(",")) forms.add(Form.of(f));
        List<Prompt> prompts = Prompts.random(p.path("prompts").asInt(), p.path("seed").asLong(), p.path("prompt_ids").asInt(), tok, engine.shape().vocabSize());
        try (FaultyServer server = new FaultyServer(engine, tok, FaultyServer.Fault.valueOf(c.path("fault").asText()), c.path("chat").asBoolean())) {
            Probe.Settings s = new Probe.Settings(server.uri(), null, "tiny-k3", forms, p.path("gen").asInt(), p.path("top").asInt(), p.path("batch").asInt(),
                    p.path("long_gen").asInt(), c.path("budget_nats").asDouble(p.path("budget_nats").asDouble()), Duration.ofSeconds(p.path("timeout_seconds").asInt()), p.path("retries").asInt(),
                    p.path("max_requests").asInt(), new ProviderGrade.Thresholds(ProviderGrade.Thresholds.DEFAULT_MIN_TOP1, ProviderGrade.Thresholds.DEFAULT_MAX_MEAN_DLOGPROB, null),
                    p.path("seed").asLong());
            var os = (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
            long cpu0 = os.getProcessCpuTime(), wall0 = System.nanoTime();
            Probe.Result r = Probe.run(s, reference, prompts);
            String cost = String.format(java.util.Locale.ROOT, "%s: %d requests, %.1f CPU s (this JVM: probe, server and reference), %.1f s wall, load %.1f", name,
                    r.requests(), (os.getProcessCpuTime() - cpu0) / 1e9, (System.nanoTime() - wall0) / 1e9, os.getSystemLoadAverage());
            System.out.println("ServingFaultsGate " + cost);
            Evidence.parameter("cost", cost);
            String screen = Screen.text(r);
            System.out.println(screen.lines().filter(l -> l.startsWith("FIRST DIVERGENCE") || l.startsWith("VERDICT")).map(l -> "ServingFaultsGate   " + l)
                    .collect(java.util.stream.Collectors.joining("\n")));
            Evidence.text("first screen", screen);
            for (Probe.Case k : r.cases()) if (!k.detail().isEmpty()) Evidence.text(k.name(), k.detail());
            Evidence.json("verdict", r.verdict().json());
            assertEquals(c.path("outcome").asText(), r.verdict().outcome().name(), screen);
            if (c.has("fails")) {
                String want = c.path("fails").asText();
                assertTrue(r.verdict().findings().stream().anyMatch(f -> f.startsWith(want + ": ") && f.contains(" parts from ") || f.startsWith(want + ": outside")),
                        "the case '" + want + "' must fail naming its first divergence:\n" + screen);
            }
            if (c.path("outcome").asText().equals("CONFORMS")) assertTrue(r.verdict().green() && r.verdict().findings().isEmpty(), screen);
            if (c.has("not_judged")) {
                String want = c.path("not_judged").asText();
                assertTrue(r.verdict().notJudged().stream().anyMatch(f -> f.startsWith(want + ": ")), "'" + want + "' must be named not judged:\n" + screen);
            }
        }
    }
}
