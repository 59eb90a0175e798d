package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.KernelFixtures;
import k3j.harness.Project;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Claim: {@code k3 compare-logits} grades a candidate against a hosted API's logprobs, in both OpenAI response
 * shapes (chat {@code logprobs.content[]}, legacy completions {@code tokens}/{@code token_logprobs}/{@code top_logprobs}):
 * a provider whose logprobs are the reference's own is within any threshold; one serving the same logits rounded to
 * bf16 is graded (a |dlogprob| the exact file does not have, within the defaults); one with a misbound layer is
 * outside the defaults; a response with a NaN logprob or a token the model's tokenizer does not hold is refused
 * (exit 2, naming the place), never graded, and so is a response to another prompt than the one rebuilt from the request
 * (its usage.prompt_tokens differs).
 *
 * <p>Data: {@code reference-dumps/provider/} (its make_provider.py writes them from reference-dumps/tiny-k3's
 * logits; every file pinned by sha256 in its manifest, which also holds the tolerances). The candidate is the
 * reference's logits as a .npy, and k3j's own teacher-forced run ({@code --run}).
 */
@Tag("provider")
@Epic("provider logprobs")
class ProviderLogprobsGate {
    static final String MODEL = "tiny-k3";

    @ParameterizedTest(name = "{0} form")
    @ValueSource(strings = {"chat", "completions"})
    @DisplayName("the exact provider file is within any threshold")
    void theExactFileIsWithinAnyThreshold(String form, @TempDir Path tmp) throws Exception {
        Allure.feature("exact");
        double tol = tolerance("exact_max_abs_dlogprob");
        String t = Double.toString(tol);
        JsonNode g = grade(0, "VERDICT: WITHIN", tmp, "exact." + form, "--min-top1", "100", "--max-dlogprob", t, "--max-kl", t);
        assertEquals(100.0, g.path("same_top1_percent").asDouble(), "same top-1");
        assertEquals(g.path("positions_compared").asInt(), g.path("provider_token_in_candidate_top_k").asInt(), "the provider's token in the candidate's top-k");
        assertTrue(g.path("abs_dlogprob_max").asDouble() <= tol, "max |dlogprob| " + g.path("abs_dlogprob_max") + " > " + tol);
    }

    @ParameterizedTest(name = "{0} form")
    @ValueSource(strings = {"chat", "completions"})
    @DisplayName("the bf16-perturbed provider file is graded: within the defaults, outside the exact file's tolerance")
    void theBf16FileIsGraded(String form, @TempDir Path tmp) throws Exception {
        Allure.feature("bf16");
        JsonNode g = grade(0, "VERDICT: WITHIN", tmp, "bf16." + form);
        double mean = g.path("abs_dlogprob_mean").asDouble();
        assertTrue(mean >= tolerance("bf16_min_mean_abs_dlogprob"), "bf16 rounding must show in |dlogprob| (mean " + mean + ")");
        grade(1, "VERDICT: OUTSIDE", tmp, "bf16." + form, "--max-dlogprob", Double.toString(tolerance("exact_max_abs_dlogprob")));
    }

    @ParameterizedTest(name = "{0} form")
    @ValueSource(strings = {"chat", "completions"})
    @DisplayName("the misbound provider file is outside the default thresholds")
    void theMisboundFileIsOutsideAtDefaultThresholds(String form, @TempDir Path tmp) throws Exception {
        Allure.feature("misbound");
        JsonNode g = grade(1, "VERDICT: OUTSIDE", tmp, "misbound." + form);
        assertTrue(g.path("same_top1_percent").asDouble() < 90, "same top-1 " + g.path("same_top1_percent"));
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"nan", "unmappable"})
    @DisplayName("a provider file with a NaN logprob or an unmappable token is refused")
    void aNanOrUnmappableTokenIsRefused(String kind, @TempDir Path tmp) throws Exception {
        Allure.feature("refused");
        ChildJvm.Result r = compare(tmp, kind + ".chat", List.of());
        Evidence.text("k3 compare-logits", r.output());
        assertEquals(2, r.exit(), r.output());
        String names = kind.equals("nan") ? "content[3].logprob is NaN" : "completion token 4 'ab' is no token of the model's tokenizer";
        assertTrue(r.output().contains(names), "the refusal must name the place: " + r.output());
        assertTrue(!r.output().contains("VERDICT"), "a refused file has no verdict: " + r.output());
    }

    @org.junit.jupiter.api.Test
    @DisplayName("a response to another prompt is refused: the chat template's prompt is not the provider's usage.prompt_tokens long")
    void aResponseToAnotherPromptIsRefused(@TempDir Path tmp) throws Exception {
        Allure.feature("refused");
        Path request = tmp.resolve("chat.request.json");
        Files.writeString(request, "{\"model\": \"kimi-k3\", \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}], \"logprobs\": true, \"top_logprobs\": 5}");
        List<String> args = new ArrayList<>(List.of("compare-logits", "--run", "--reference", pinned("exact.chat.json").toString(), "--request", request.toString(),
                "--model", Project.fixture(MODEL).toString()));
        ChildJvm.Result r = ChildJvm.k3(args.toArray(String[]::new));
        Evidence.text("k3 compare-logits", r.output());
        assertEquals(2, r.exit(), r.output());
        assertTrue(r.output().contains("the provider counted 12 prompt tokens (usage.prompt_tokens)"), r.output());
        assertTrue(!r.output().contains("VERDICT"), "a refused file has no verdict: " + r.output());
    }

    @ParameterizedTest(name = "{0} form")
    @ValueSource(strings = {"chat", "completions"})
    @DisplayName("k3j's own teacher-forced run is within the defaults against the exact file, outside against the misbound one")
    void k3jsOwnRunIsGraded(String form, @TempDir Path tmp) throws Exception {
        Allure.feature("k3j --run");
        grade(0, "VERDICT: WITHIN", tmp, "exact." + form, "--run");
        grade(1, "VERDICT: OUTSIDE", tmp, "misbound." + form, "--run");
    }

    /** Runs compare-logits on one provider file and returns its graded figures; the exit and verdict line must be as given. */
    private static JsonNode grade(int exit, String verdict, Path tmp, String file, String... extra) throws Exception {
        ChildJvm.Result r = compare(tmp, file, List.of(extra));
        Evidence.text("k3 compare-logits " + file + " " + String.join(" ", extra), r.output());
        assertEquals(exit, r.exit(), r.output());
        assertTrue(r.output().contains(verdict), "expected " + verdict + ": " + r.output());
        JsonNode g = Project.json(tmp.resolve("grade.json")).path("graded");
        Evidence.parameter(file + " " + String.join(" ", extra), String.format(Locale.ROOT, "same top-1 %.1f%%, mean |dlogprob| %.3g, max %.3g, mean KL %.3g",
                g.path("same_top1_percent").asDouble(), g.path("abs_dlogprob_mean").asDouble(), g.path("abs_dlogprob_max").asDouble(), g.path("kl_top_k_mean").asDouble()));
        return g;
    }

    private static ChildJvm.Result compare(Path tmp, String file, List<String> extra) throws Exception {
        List<String> args = new ArrayList<>(List.of("compare-logits"));
        if (!extra.contains("--run")) args.add(pinned("reference.logits.npy").toString());
        args.addAll(List.of("--reference", pinned(file + ".json").toString(), "--request", pinned("request.completions.json").toString(),
                "--model", Project.fixture(MODEL).toString(), "--json", tmp.resolve("grade.json").toString()));
        args.addAll(extra);
        Files.deleteIfExists(tmp.resolve("grade.json"));
        return ChildJvm.k3(args.toArray(String[]::new));
    }

    /** reference-dumps/provider/FILE after checking its sha256 against the folder's manifest. */
    private static Path pinned(String file) throws Exception {
        Path p = Project.dump("provider/" + file);
        for (JsonNode f : Project.json(Project.dump("provider/manifest.json")).path("files")) {
            if (f.path("file").asText().equals(file)) {
                if (!f.path("sha256").asText().equals(KernelFixtures.sha256(Files.readAllBytes(p)))) fail(p + ": sha256 differs from the manifest (stale or edited fixture)");
                return p;
            }
        }
        return fail("reference-dumps/provider/manifest.json does not pin " + file);
    }

    private static double tolerance(String key) {
        JsonNode v = Project.json(Project.dump("provider/manifest.json")).path("tolerances").path(key);
        if (!v.isNumber()) fail("reference-dumps/provider/manifest.json has no tolerances." + key);
        return v.asDouble();
    }
}
