package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;
import k3j.harness.Evidence;
import k3j.harness.KernelFixtures;
import k3j.harness.Project;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.io.SafetensorsFile;
import k3j.io.TensorInfo;
import k3j.io.TensorReader;
import k3j.io.Widen;
import org.junit.jupiter.api.Named;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The safetensors reader reads what the files hold, exactly, and refuses every malformed checkpoint
 * with the rule it breaks. One loop over oracle-fixtures/safetensors/MANIFEST.json (written by
 * gen_safetensors.py beside it): a valid case is read three ways (positional read, mmap, O_DIRECT) and
 * widened, and every byte and every widened float32 bit pattern must equal the manifest's (the metric:
 * mismatching elements, budget 0 — widening is exact). A refused case must be refused by the reader with
 * the manifest's rule and by {@code k3 inspect} as a real process: exit 1, the rule and the fragments in
 * its output, no stack trace, within the timeout.
 */
@Tag("safetensors")
@Epic("safetensors")
class SafetensorsGate {
    private static final long INSPECT_TIMEOUT_S = 60;

    static Path fixtures() {
        return Project.fixture("safetensors");
    }

    static JsonNode manifest() {
        return Project.json(fixtures().resolve("MANIFEST.json"));
    }

    static Stream<Named<JsonNode>> cases() {
        JsonNode cases = manifest().path("cases");
        if (!cases.isArray() || cases.isEmpty()) fail("MANIFEST.json holds no cases");
        return StreamSupport.stream(cases.spliterator(), false)
                .map(c -> Named.of(c.path("kind").asText() + " " + c.path("name").asText(), c));
    }

    @Test
    void theFixturesAreTheOnesTheManifestDescribes() throws IOException {
        Allure.feature("fixtures");
        JsonNode files = manifest().path("files");
        assertTrue(files.size() > 0, "MANIFEST.json lists no files");
        for (JsonNode f : files) {
            String file = f.path("file").asText();
            byte[] bytes = Files.readAllBytes(Project.existing(fixtures().resolve(file)));
            assertEquals(f.path("sha256").asText(), KernelFixtures.sha256(bytes), file + " differs from MANIFEST.json: rerun gen_safetensors.py");
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void everyCaseIsReadExactlyOrRefusedByItsRule(JsonNode c) throws Exception {
        Path path = Project.existing(fixtures().resolve(c.path("path").asText()));
        Allure.feature(c.path("kind").asText() + " checkpoints");
        Allure.story(c.path("name").asText());
        Evidence.parameter("case", c.path("name").asText());
        Evidence.parameter("kind", c.path("kind").asText());
        Evidence.text("what", c.path("what").asText());
        switch (c.path("kind").asText()) {
            case "valid" -> valid(c, path);
            case "refused" -> refused(c, path);
            default -> fail("unknown case kind " + c.path("kind"));
        }
    }

    // ---------------------------------------------------------------------------------------------

    private static void valid(JsonNode c, Path path) throws Exception {
        CheckpointIndex index = CheckpointIndex.open(path);
        List<String> shards = index.shards().stream().map(s -> s.file().getFileName().toString()).toList();
        assertEquals(texts(c.path("shards")), shards, "shards in byte-wise order");
        JsonNode tensors = c.path("tensors");
        assertEquals(tensors.size(), index.size(), "tensor count");
        long mismatches = 0;
        List<String> where = new ArrayList<>();
        try (TensorReader reader = new TensorReader(); Arena arena = Arena.ofConfined()) {
            for (JsonNode want : tensors) {
                for (String k : List.of("name", "dtype", "shape", "shard", "file", "offset", "length", "bytes_hex")) {
                    if (!want.has(k)) throw new AssertionError("a tensor in MANIFEST.json lacks '" + k + "' (it would compare against a default): " + want);
                }
                String name = want.path("name").asText();
                TensorInfo t = index.find(name).orElseThrow(() -> new AssertionError("no tensor " + CheckpointException.quote(name)));
                assertEquals(want.path("dtype").asText(), t.dtype().name(), name);
                assertEquals(longs(want.path("shape")), longs(t.shape()), name + " shape");
                assertEquals(want.path("shard").asInt(), t.shard(), name + " shard");
                assertEquals(want.path("file").asText(), t.file().getFileName().toString(), name + " file");
                assertEquals(want.path("offset").asLong(), t.offset(), name + " offset");
                assertEquals(want.path("length").asLong(), t.length(), name + " length");
                byte[] raw = HexFormat.of().parseHex(want.path("bytes_hex").asText());
                MemorySegment[] reads = {reader.read(t, arena), reader.map(t, arena), reader.readDirect(t, arena)};
                for (MemorySegment seg : reads) {
                    byte[] got = seg.toArray(ValueLayout.JAVA_BYTE);
                    for (int i = 0; i < Math.max(raw.length, got.length); i++) {
                        if (i >= raw.length || i >= got.length || raw[i] != got[i]) {
                            mismatches++;
                            where.add(name + " byte " + i);
                        }
                    }
                }
                if (want.has("widened_bits")) {
                    float[] f = Widen.toFloats(t, reads[0]);
                    JsonNode bits = want.path("widened_bits");
                    assertEquals(bits.size(), f.length, name + " element count");
                    for (int i = 0; i < f.length; i++) {
                        int wantBits = Integer.parseUnsignedInt(bits.get(i).asText(), 16);
                        if (Float.floatToRawIntBits(f[i]) != wantBits) {
                            mismatches++;
                            where.add(String.format("%s[%d] = %08x, want %08x", name, i, Float.floatToRawIntBits(f[i]), wantBits));
                        }
                    }
                } else {
                    CheckpointException e = assertThrows(CheckpointException.class, () -> reader.readFloats(t), name);
                    assertEquals(want.path("widen").asText(), e.rule().id(), name);
                }
            }
        }
        Evidence.parameter("mismatches", mismatches);
        if (!where.isEmpty()) Evidence.text("mismatches", String.join("\n", where));
        assertEquals(0, mismatches, "bytes or widened bits differ: " + where.stream().limit(10).toList());
        if (c.path("metadata").isObject()) {
            SafetensorsFile only = index.shards().getFirst();
            for (Map.Entry<String, JsonNode> m : c.path("metadata").properties()) {
                assertEquals(m.getValue().asText(), only.metadata().get(m.getKey()), "__metadata__ " + m.getKey());
            }
            assertEquals(c.path("metadata").size(), only.metadata().size(), "__metadata__ size");
        }
        for (SafetensorsFile s : index.shards()) {
            long want = c.path("trailing_bytes").path(s.file().getFileName().toString()).asLong(0);
            assertEquals(want, s.trailingBytes(), s.file() + " trailing bytes");
        }

        Inspect run = inspect(path);
        assertEquals(0, run.exit(), run.output());
        assertTrue(run.output().contains("tensors: " + tensors.size()), run.output());
        for (Map.Entry<String, JsonNode> tail : c.path("trailing_bytes").properties()) {
            assertTrue(run.output().contains(tail.getValue().asLong() + " trailing bytes"), run.output());
        }
        assertClean(run);
    }

    private static void refused(JsonNode c, Path path) throws Exception {
        String rule = c.path("rule").asText();
        List<String> fragments = texts(c.path("must_name"));
        assertFalse(rule.isBlank() || fragments.isEmpty(), "a refused case names its rule and message fragments");
        Evidence.parameter("rule", rule);

        CheckpointException e = assertThrows(CheckpointException.class, () -> CheckpointIndex.open(path),
                "the reader accepted " + path);
        Evidence.text("reader", e.getMessage());
        assertEquals(rule, e.rule().id(), e.getMessage());
        for (String f : fragments) assertTrue(e.getMessage().contains(f), "reader message lacks <" + f + ">: " + e.getMessage());

        Inspect run = inspect(path);
        assertEquals(1, run.exit(), "k3 inspect exit code (1 = invalid checkpoint): " + run.output());
        assertTrue(run.output().contains("k3 inspect: "), run.output());
        assertTrue(run.output().contains("[" + rule + "]"), run.output());
        for (String f : fragments) assertTrue(run.output().contains(f), "k3 inspect output lacks <" + f + ">: " + run.output());
        assertClean(run);
    }

    private static void assertClean(Inspect run) {
        assertFalse(run.output().contains("Exception") || run.output().contains("\tat "), "stack trace text: " + run.output());
    }

    // ---------------------------------------------------------------------------------------------
    // k3 inspect as a real process: the shaded jar run by this JVM's java with bin/k3's flags

    record Inspect(int exit, String output) {}

    private static Inspect inspect(Path path) throws IOException, InterruptedException {
        Path jar = Project.root().resolve("engine/target/k3.jar");
        if (!Files.isRegularFile(jar)) fail("engine/target/k3.jar is missing: build it (ci/mvn -pl engine -am package) or run the reactor");
        String java = ProcessHandle.current().info().command().orElseThrow(() -> new AssertionError("cannot find this JVM's java"));
        Path log = Files.createTempFile("k3-inspect", ".txt");
        try {
            // output goes to a file, so a chatty process can never block on a full pipe
            Process p = new ProcessBuilder(java, "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
                    "-XX:+UseParallelGC", "-jar", jar.toString(), "inspect", path.toString())
                    .redirectErrorStream(true).redirectOutput(log.toFile()).redirectInput(ProcessBuilder.Redirect.from(devNull()))
                    .start();
            if (!p.waitFor(INSPECT_TIMEOUT_S, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                fail("k3 inspect " + path + " did not finish within " + INSPECT_TIMEOUT_S + " s");
            }
            String text = Files.readString(log, StandardCharsets.UTF_8).lines()
                    .filter(l -> !l.startsWith("WARNING: Using incubator modules"))
                    .reduce("", (a, b) -> a + b + "\n");
            Evidence.text("k3 inspect", text);
            return new Inspect(p.exitValue(), text);
        } finally {
            Files.deleteIfExists(log);
        }
    }

    private static java.io.File devNull() {
        return new java.io.File(System.getProperty("os.name").startsWith("Windows") ? "NUL" : "/dev/null");
    }

    private static List<String> texts(JsonNode array) {
        List<String> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asText()));
        return out;
    }

    private static List<Long> longs(JsonNode array) {
        List<Long> out = new ArrayList<>();
        array.forEach(n -> out.add(n.asLong()));
        return out;
    }

    private static List<Long> longs(long[] a) {
        List<Long> out = new ArrayList<>();
        for (long v : a) out.add(v);
        return out;
    }
}
