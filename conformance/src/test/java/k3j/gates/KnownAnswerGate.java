package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import k3j.cache.ExpertCache;
import k3j.compare.KnownAnswer;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ReportPart;
import k3j.kernels.Workers;
import k3j.model.Generation;
import k3j.model.Model;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: the released Kimi K3 continues "The capital of France is" (ids 1008,10484,318,15383,387) greedily with
 * 17374, 20829 — the published run's first two ids. The published run went on with 10,427,414,1008,606,142957, but
 * it came from an engine that departs from the official MLA LoRA-norm eps, so those ids are reported, not asserted.
 *
 * <p>Applies only to the released model (its config's dimensions, layer map and vocabulary, and its 96 shards:
 * {@link KnownAnswer#skipReason}); for any other {@code -Dk3.model} the case is skipped with that reason shown —
 * the one checkpoint case allowed to skip. Experts go through a {@code -Dk3.cacheGb} cache (default 32 GB).
 */
@Tag("checkpoint")
@Tag("model")   // needs k3j's forward over -Dk3.model: left out of -Pcandidate
@Epic("checkpoint conformance")
class KnownAnswerGate {
    @Test
    void theReleasedModelContinuesTheCapitalOfFranceWithThePublishedIds() throws Exception {
        Evidence.part(ReportPart.MODEL);
        String m = Project.property("k3.model");
        if (m.isEmpty()) fail("gate data missing: -Dk3.model is not set (mvn verify -Pcheckpoint -Dk3.model=DIR)");
        Path dir = Project.root().resolve(m);
        if (!Files.isDirectory(dir)) fail("gate data missing: -Dk3.model=" + m + " is not a directory");
        ModelConfig c = ConfigReader.read(dir.resolve("config.json"));
        List<String> why = KnownAnswer.skipReason(c, dir);
        Evidence.parameter("selected", why.isEmpty() ? "the released model" : "no: " + String.join("; ", why));
        Assumptions.assumeTrue(why.isEmpty(), () -> "not the released Kimi K3, so its published continuation does not apply: " + String.join("; ", why));
        String gb = Project.property("k3.cacheGb");
        long cache = Math.round((gb.isEmpty() ? 32 : Double.parseDouble(gb)) * 1e9);
        int gen = KnownAnswer.ASSERTED.length + KnownAnswer.REPORTED.length;
        try (Model model = Model.open(dir); Workers w = Workers.of(Runtime.getRuntime().availableProcessors());
             ExpertCache ec = ExpertCache.open(model.experts(), ExpertCache.Settings.of(cache, c.topK()), null, s -> {})) {
            int[] ids = Generation.greedy(model.forward(w, ec), KnownAnswer.PROMPT, gen, true).generated();
            Evidence.parameter("generated", Arrays.toString(ids));
            Evidence.parameter("published (reported, not asserted) after the first two", Arrays.toString(KnownAnswer.REPORTED));
            assertArrayEquals(KnownAnswer.ASSERTED, Arrays.copyOf(ids, KnownAnswer.ASSERTED.length), "the first two greedy ids of the published run");
        }
    }
}
