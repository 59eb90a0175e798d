package k3j.gates;

import com.code_intelligence.jazzer.junit.FuzzTest;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.util.concurrent.TimeUnit;
import k3j.fuzz.FuzzTargets;
import k3j.fuzz.Limits;
import k3j.harness.JazzerLog;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Timeout;

/**
 * Every reader of untrusted bytes ends every input in a clean refusal or a valid result: never an exception
 * escaping, never a hang past {@value Limits#SECONDS_PER_INPUT} s, never an allocation past
 * {@link Limits#MAX_ALLOCATED_BYTES} bytes. In the build each target replays its checked-in corpus
 * ({@code src/test/resources/k3j/gates/FuzzGateInputs/<target>/}: every reproducer found so far, and seeds) in
 * Jazzer's regression mode; {@code ci/fuzz TARGET SECONDS} fuzzes one target with coverage and reports
 * executions, coverage and findings, and .ci/run fuzzes each for a bounded time.
 */
@Tag("fuzz")
@Epic("fuzz")
@Timeout(value = Limits.SECONDS_PER_INPUT, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)   // per input, every target
class FuzzGate {

    @BeforeAll
    static void quietJazzer() {
        JazzerLog.withoutInfo();   // its per-hook and per-class info lines, before its agent loads (JazzerLog says why)
    }

    @FuzzTest
    @Feature("safetensors header")
    @DisplayName("the safetensors header reader and the inspect summary")
    void safetensors(byte[] data) {
        Limits.check("safetensors", data, FuzzTargets::safetensors);
    }

    @FuzzTest
    @Feature("config")
    @DisplayName("the config reader")
    void config(byte[] data) {
        Limits.check("config", data, FuzzTargets::config);
    }

    @FuzzTest
    @Feature("index")
    @DisplayName("the index.json reader")
    void index(byte[] data) {
        Limits.check("index", data, FuzzTargets::index);
    }

    @FuzzTest
    @Feature("reference dump")
    @DisplayName("the dump manifest and array reader, checked against the oracle's config")
    void dump(byte[] data) {
        Limits.check("dump", data, FuzzTargets::dump);
    }

    @FuzzTest
    @Feature("one-file candidate")
    @DisplayName("the one-file candidate reader (.safetensors, .npz), checked against the oracle's reference")
    void candidate(byte[] data) {
        Limits.check("candidate", data, FuzzTargets::candidate);
    }

    @FuzzTest
    @Feature("trunk manifest")
    @DisplayName("the trunk manifest reader")
    void trunk(byte[] data) {
        Limits.check("trunk", data, FuzzTargets::trunk);
    }

    @FuzzTest
    @Feature("command line")
    @DisplayName("the k3 argument parser and a run's flag checks")
    void cli(byte[] data) {
        Limits.check("cli", data, FuzzTargets::cli);
    }

    @FuzzTest
    @Feature("chat history")
    @DisplayName("the chat history reader")
    void history(byte[] data) {
        Limits.check("history", data, FuzzTargets::history);
    }

    @FuzzTest
    @Feature("tokenizer files")
    @DisplayName("the tokenizer's tiktoken.model and tokenizer_config.json readers, then an encode and decode")
    void tokenizer(byte[] data) {
        Limits.check("tokenizer", data, FuzzTargets::tokenizer);
    }

    @FuzzTest
    @Feature("state file")
    @DisplayName("the state file reader, sized from its header as a run sizes it, into the tiny model's state")
    void state(byte[] data) {
        Limits.check("state", data, FuzzTargets::state);
    }

    @FuzzTest
    @Feature("logit file")
    @DisplayName("the compare-logits file reader (raw float32 and .npy)")
    void logits(byte[] data) {
        Limits.check("logits", data, FuzzTargets::logits);
    }

    @FuzzTest
    @Feature("provider response")
    @DisplayName("the provider-response reader (chat and completions logprobs) and its token mapping")
    void provider(byte[] data) {
        Limits.check("provider", data, FuzzTargets::provider);
    }

    @FuzzTest
    @Feature("shard plan")
    @DisplayName("a shard folder's plan.json, as the merge reads it")
    void shardplan(byte[] data) {
        Limits.check("shardplan", data, FuzzTargets::shardPlan);
    }

    @FuzzTest
    @Feature("shard done")
    @DisplayName("a finished shard's completion marker done.json")
    void sharddone(byte[] data) {
        Limits.check("sharddone", data, FuzzTargets::shardDone);
    }

    @FuzzTest
    @Feature("shard results")
    @DisplayName("a shard's results.json, the marker naming it")
    void shardresults(byte[] data) {
        Limits.check("shardresults", data, FuzzTargets::shardResults);
    }

    @FuzzTest
    @Feature("merge")
    @DisplayName("the merge of a one-shard run, its coverage from the reference: never green over a layer not judged")
    void merge(byte[] data) {
        Limits.check("merge", data, FuzzTargets::merge);
    }

    @FuzzTest
    @Feature("expert trace")
    @DisplayName("the expert trace reader, checked against the released model, and one replay")
    void trace(byte[] data) {
        Limits.check("trace", data, FuzzTargets::trace);
    }
}
