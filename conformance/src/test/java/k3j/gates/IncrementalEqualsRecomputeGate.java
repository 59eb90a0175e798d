package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Epic;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import k3j.cli.K3;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.model.Assembly;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: {@code k3}'s default, incremental decoding, gives the bits of {@code --recompute} (every step one
 * forward over the whole sequence): the same stdout byte for byte, the same generated ids, and the same float32
 * logits of the first step (--dump-logits), greedy and sampled (a sampled draw turns on the logits' low bits, so
 * any drift shows as other ids), on the 13-layer oracle and on the 93-layer one. Metric per case: ids equal.
 */
@Tag("oracle")
@Epic("oracle")
class IncrementalEqualsRecomputeGate {
    static Stream<Arguments> runs() {
        return Stream.of(
                Arguments.of("tiny-k3", "greedy, 32 ids past the end of sequence", List.of("--ids", "250,17,101,3,199,64", "--gen", "32", "--ignore-eos")),
                Arguments.of("tiny-k3", "sampled (temperature 1.5, top-k 40), text", List.of("--prompt", "hello there", "--gen", "24", "--temperature", "1.5",
                        "--top-k", "40", "--seed", "7", "--ignore-eos")),
                Arguments.of("mini-k3-93", "greedy, 93 layers", List.of("--ids", "1,2,3,4,5", "--gen", "8")));
    }

    private record Run(int exit, String out, String err, JsonNode json, byte[] logits) {}

    private static Run k3(Path dir, String model, List<String> flags, String mode) throws Exception {
        Path out = dir.resolve(mode + ".json"), logits = dir.resolve(mode + ".bin");
        List<String> a = new ArrayList<>(List.of(Project.fixture(model).toString(), "--threads", "2", "--out", out.toString(), "--dump-logits", logits.toString()));
        a.addAll(flags);
        if (mode.equals("recompute")) a.add("--recompute");
        StringWriter o = new StringWriter(), e = new StringWriter();
        int rc = K3.execute(new PrintWriter(o, true), new PrintWriter(e, true), Assembly.Intercepts.NONE, a.toArray(String[]::new));
        assertEquals(0, rc, "k3 " + String.join(" ", a) + "\n" + e);
        return new Run(rc, o.toString(), e.toString(), new ObjectMapper().readTree(out.toFile()), Files.readAllBytes(logits));
    }

    @ParameterizedTest(name = "{0}: {1}")
    @MethodSource("runs")
    void incrementalDecodingGivesTheBitsOfFullRecompute(String model, String what, List<String> flags, @TempDir Path dir) throws Exception {
        Run inc = k3(dir, model, flags, "incremental"), full = k3(dir, model, flags, "recompute");
        assertTrue(inc.err().contains("(incremental)") && full.err().contains("(full recompute)"), "the banner names the mode:\n" + inc.err() + full.err());
        assertTrue(inc.json().path("incremental").asBoolean() && !full.json().path("incremental").asBoolean(), "--out records the mode");
        JsonNode a = inc.json().path("generated_ids"), b = full.json().path("generated_ids");
        int same = 0;
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) if (a.get(i).asInt() == b.get(i).asInt()) same++;
        Evidence.parameter("ids equal", same + "/" + b.size());
        assertTrue(b.size() > 0, "the run generated nothing");
        assertEquals(b, a, "the generated ids");
        assertEquals(full.out(), inc.out(), "stdout, byte for byte");
        assertArrayEquals(full.logits(), inc.logits(), "the first step's float32 logits, bit for bit");
    }
}
