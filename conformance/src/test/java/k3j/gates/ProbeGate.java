package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;
import k3j.api.Plan;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.RunPlan;
import k3j.probe.Form;
import k3j.probe.Probe;
import k3j.probe.Prompts;
import k3j.probe.Reference;
import k3j.probe.Screen;
import k3j.provider.ProviderGrade;
import k3j.tokenizer.Tokenizer;
import k3j.verdict.Invariants;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;

/**
 * Claim: the server at {@code -Dk3.url} answers as k3j does on {@code -Dk3.model}, and holds every invariance
 * property of the probe. One case for the verdict (its findings and first divergence, on the report's first screen),
 * then one per prompt and form and one per property; the run's verdict file is the probe's one decision. A missing
 * {@code -Dk3.url} or {@code -Dk3.model} fails: nothing is judged without a server and a reference.
 */
@Tag("probe")
@Epic("probe")
class ProbeGate {
    @TestFactory
    Stream<DynamicTest> probeTheServer() throws Exception {
        String url = Project.property("k3.url"), model = Project.property("k3.model");
        if (url.isEmpty() || model.isEmpty()) fail("-Pprobe needs -Dk3.url=http://HOST:PORT and -Dk3.model=DIR");
        Path dir = Project.root().resolve(model);
        Path tokDir = java.nio.file.Files.isRegularFile(dir.resolve(Tokenizer.RANKS_FILE)) ? dir : null;
        Set<Form> forms = EnumSet.noneOf(Form.class);
        for (String f : property("k3.forms", tokDir == null ? "completions" : "completions,chat").split(",")) forms.add(Form.of(f));
        String key = Project.property("k3.apiKey");
        Probe.Settings s = new Probe.Settings(URI.create(url), key.isEmpty() ? null : key, dir.toAbsolutePath().normalize().getFileName().toString(), forms,
                Integer.parseInt(property("k3.gen", "8")), 5, Integer.parseInt(property("k3.batch", "4")), Integer.parseInt(property("k3.longGen", "16")), 0,
                Duration.ofSeconds(120), 4, 5000, new ProviderGrade.Thresholds(ProviderGrade.Thresholds.DEFAULT_MIN_TOP1, ProviderGrade.Thresholds.DEFAULT_MAX_MEAN_DLOGPROB, null), 1);
        Probe.Result r;
        try (Reference ref = Reference.model(dir, tokDir, Plan.resident(), Runtime.getRuntime().availableProcessors(), 4096, text -> {})) {
            r = Probe.run(s, ref, Prompts.random(Integer.parseInt(property("k3.prompts", "3")), 1, 8, ref.tokenizer(), ref.vocab()));
        }
        RunPlan.decided(r.verdict().json());
        String screen = Screen.text(r);
        List<DynamicTest> tests = new ArrayList<>();
        tests.add(DynamicTest.dynamicTest("the probe's verdict: " + r.verdict().outcome().words(), () -> {
            Allure.feature("probe");
            Evidence.text("first screen", screen);
            Evidence.json("verdict", r.verdict().json());
            assertTrue(r.verdict().green(), screen);
        }));
        for (Probe.Case c : r.cases()) {
            tests.add(DynamicTest.dynamicTest((c.kind() == Probe.Kind.PROPERTY ? "property: " : "") + c.name(), () -> {
                Allure.feature(c.kind() == Probe.Kind.PROPERTY ? "invariance properties" : "conformance per prompt");
                if (!c.detail().isEmpty()) Evidence.text("evidence", c.detail());
                if (c.item().status() != Invariants.Status.PASS) fail(c.item().status() + ": " + c.item().why());
            }));
        }
        return tests.stream();
    }

    private static String property(String name, String otherwise) {
        String v = Project.property(name);
        return v.isEmpty() ? otherwise : v;
    }
}
