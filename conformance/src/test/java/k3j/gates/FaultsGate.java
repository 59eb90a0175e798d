package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.cli.ExitCode;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.harness.Child;
import k3j.harness.Caught;
import k3j.harness.Evidence;
import k3j.harness.SlowOutput;
import k3j.harness.Project;
import k3j.harness.Tamper;
import k3j.conform.ReferenceDump;
import k3j.kernels.Workers;
import k3j.model.Model;
import k3j.trunk.TrunkManifest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The harness cannot pass what it did not check, and a fault during a run never ends in plausible output.
 * Each case injects one fault into a copy of the checked-in 93-layer oracle (its reference dump, its shards,
 * its trunk, the disk under an output) and asserts the refusal: its exit code or finding, the rule named, no
 * token printed after the fault, no complete-looking output left behind.
 */
@Tag("faults")
@Epic("faults")
class FaultsGate {
    @TempDir
    Path tmp;

    // ---------------------------------------------------------------------------------------------
    // a tampered reference dump (sha256 list kept consistent, so only the rule under test can catch it)

    @Test
    @Feature("reference dump")
    @DisplayName("a NaN in layers.40.attn_out fails L40 as [non-finite], with both finite counts")
    void aNanInTheReferenceFailsTheLayer() {
        Path dump = tamperedDump(d -> Tamper.setFloat(d, "layers.40.attn_out", 17, Float.NaN));
        LayerReport r = layer(dump, 40);
        caught("a NaN in layers.40.attn_out", r).attach();
        Evidence.text("verdict", r.line());
        assertEquals(Finding.NON_FINITE, r.finding(), r.line());
        assertTrue(r.message().contains("attn_out is not finite (finite ref 639/640, engine 640/640)"), r.message());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("+Inf in layers.40.mlp_out fails L40 as [non-finite]")
    void anInfinityInTheReferenceFailsTheLayer() {
        Path dump = tamperedDump(d -> Tamper.setFloat(d, "layers.40.mlp_out", 3, Float.POSITIVE_INFINITY));
        LayerReport r = layer(dump, 40);
        caught("+Inf in layers.40.mlp_out", r).attach();
        assertEquals(Finding.NON_FINITE, r.finding(), r.line());
        assertTrue(r.message().contains("mlp_out is not finite"), r.message());
    }

    /** The report's row for a tampered dump the layer judged: its first failing stage and finding. */
    static Caught caught(String planted, LayerReport r) {
        if (r.conforms()) return Caught.missed("tampered dump", planted);
        k3j.conform.StageMetric w = r.worst();
        return new Caught("tampered dump", planted, r.layer(), r.firstDivergence(), r.finding().tag(), w == null ? null : w.ratioToBudget());
    }

    static Stream<Arguments> refusedDumps() {
        return Stream.of(
                refused("a truncated kda_state (sha256 updated)", d -> Tamper.truncate(d, "layers.40.kda_state", 100), "layers.40.kda_state.bin: 100 bytes"),
                refused("a truncated q_conv_state", d -> Tamper.truncate(d, "layers.40.q_conv_state", 8), "layers.40.q_conv_state.bin: 8 bytes"),
                refused("a truncated moe_choice (never compared)", d -> Tamper.truncate(d, "layers.40.moe_choice", 4), "layers.40.moe_choice.bin: 4 bytes"),
                refused("a truncated mla_kv (never compared)", d -> Tamper.truncate(d, "layers.39.mla_kv", 12), "layers.39.mla_kv.bin: 12 bytes"),
                refused("a 7-byte final_norm.bin", d -> Tamper.truncate(d, "final_norm", 7), "final_norm.bin: 7 bytes"),
                refused("an empty ids.bin", d -> Tamper.truncate(d, "ids", 0), "ids.bin: 0 bytes"),
                refused("a manifest with every sha256 removed", d -> Tamper.manifest(d, m -> m.path("arrays").forEach(a -> ((ObjectNode) a).remove("sha256"))),
                        "has no sha256"),
                refused("an array the harness does not know", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("arrays")).set("layers.40.extra",
                        m.path("arrays").path("layers.40.attn_out").deepCopy())), "array 'layers.40.extra' is neither compared nor listed as unused"),
                refused("a missing array", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("arrays")).remove("layers.40.mlp_norm")),
                        "array 'layers.40.mlp_norm' is missing"),
                refused("budget.factor = 1e12", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("budget")).put("factor", 1e12)
                        ), "budget.factor = 1.0E12 is looser than the harness's 50.0"),
                refused("every width set to 2^31-1, stored budgets recomputed to match", d -> Tamper.manifest(d, m -> {
                    double wide = 1.2e-7 * Math.sqrt(Integer.MAX_VALUE) * 50;
                    m.path("budget").path("stages").forEach(s -> ((ObjectNode) s).put("width", Integer.MAX_VALUE).put("budget", wide));
                    ((ObjectNode) m.path("budget").path("logits")).put("width", Integer.MAX_VALUE).put("budget", wide);
                }), ".width = 2147483647, but the config gives"),
                refused("layers[40].mixer = mla on a KDA layer", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("layers").get(40)).put("mixer", "mla")),
                        "manifest layers[40].mixer = mla, but the model's config gives kda"),
                refused("layers[40].snapshots_attn off by one", d -> Tamper.manifest(d, m -> ((ObjectNode) m.path("layers").get(40)).put("snapshots_attn", 3)),
                        "manifest layers[40].snapshots_attn = 3, but the model's config gives 4"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedDumps")
    @Feature("reference dump")
    @DisplayName("a dump whose arrays or budget are not this model's is refused before any verdict, naming the field")
    void aTamperedDumpIsRefusedBeforeAnyVerdict(String name, Consumer<Path> tamper, String expected) {
        Path dump = tamperedDump(tamper);
        ConformException e;
        try {
            layer(dump, 40);
            Caught.missed("tampered dump", name).attach();
            throw new AssertionError(name + " was not refused");
        } catch (ConformException refused) {
            e = refused;
        }
        new Caught("tampered dump", name, null, expected, e.finding().tag(), null).attach();
        Evidence.text("refusal", e.getMessage());
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }

    @Test
    @Feature("reference dump")
    @DisplayName("a half-truncated .tar.gz dump is refused saying it is truncated, not 'null'")
    void aHalfTruncatedArchiveIsRefusedByName() throws IOException {
        Path tgz = tmp.resolve("mini-k3-93.tar.gz");
        ProcessBuilder pb = new ProcessBuilder("tar", "-czf", tgz.toString(), "-C", Project.dump("mini-k3-93").toString(), ".").inheritIO();
        try {
            assertEquals(0, pb.start().waitFor());
        } catch (InterruptedException e) {
            throw new IOException(e);
        }
        byte[] b = Files.readAllBytes(tgz);
        Files.write(tgz, java.util.Arrays.copyOf(b, b.length / 2));
        ConformException e = assertThrows(ConformException.class, () -> layer(tgz, 40));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains(tgz.toString()) && !e.getMessage().endsWith("null"), e.getMessage());
        assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("truncated") || e.getMessage().contains("EOF"), e.getMessage());
    }

    // ---------------------------------------------------------------------------------------------
    // hostile files: refused by type or size before they are opened or allocated

    static Stream<Arguments> specialFiles() {
        return Stream.of(
                special("a FIFO as config.json", "config.json", true),
                special("/dev/zero as config.json", "config.json", false),
                special("a FIFO as model.safetensors.index.json", "model.safetensors.index.json", true),
                special("/dev/zero as model.safetensors.index.json", "model.safetensors.index.json", false),
                special("a FIFO named like a shard", "model-00003-of-00003.safetensors", true));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("specialFiles")
    @Feature("hostile files")
    @DisplayName("a FIFO or a device where a file belongs is refused by its type, never read (no hang, no OutOfMemoryError)")
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aSpecialFileIsRefusedByType(String name, String file, boolean fifo) throws IOException {
        Path model = Tamper.copy(Project.fixture("tiny-k3"), tmp.resolve("tiny"));
        if (file.endsWith(".safetensors")) Files.delete(model.resolve("model.safetensors.index.json"));   // the directory scan finds it
        replaceWithSpecial(model.resolve(file), fifo);
        try (Child c = Child.k3("inspect", model.toString())) {
            int rc = c.exitCode();
            Evidence.text("k3 inspect", c.transcript());
            if (file.equals("config.json")) {
                try (Child cfg = Child.k3("inspect", model.resolve(file).toString())) {
                    assertEquals(ExitCode.USAGE, cfg.exitCode(), cfg.transcript());
                    assertTrue(cfg.transcript().contains("not a regular file"), cfg.transcript());
                }
            } else {
                assertEquals(ExitCode.RUNTIME, rc, c.transcript());
                assertTrue(c.transcript().contains("not a regular file") && c.transcript().contains(file), c.transcript());
            }
        }
    }

    @Test
    @Feature("hostile files")
    @DisplayName("a FIFO or /dev/zero as a dump array is refused by type, naming the file")
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aSpecialDumpArrayIsRefusedByType() throws IOException {
        for (boolean fifo : new boolean[] {true, false}) {
            Path dump = Tamper.copy(Project.dump("mini-k3-93"), tmp.resolve("dump-" + fifo));
            replaceWithSpecial(dump.resolve("layers.40.attn_out.bin"), fifo);
            ConformException e = assertThrows(ConformException.class, () -> layer(dump, 40));
            assertTrue(e.getMessage().contains("layers.40.attn_out.bin") && e.getMessage().contains("not a regular file"), e.getMessage());
        }
    }

    // ---------------------------------------------------------------------------------------------
    // config against checkpoint

    static Stream<Arguments> configsThatDoNotDescribeTheWeights() {
        return Stream.of(
                Arguments.of("12 layers for a 13-layer checkpoint", (Consumer<ObjectNode>) t -> {
                    t.put("num_hidden_layers", 12);
                    ((ObjectNode) t.path("linear_attn_config")).putArray("full_attn_layers").add(4).add(8).add(12);
                    ((ObjectNode) t.path("linear_attn_config")).remove("kda_layers");
                }, "holds layers past the config's num_hidden_layers = 12"),
                Arguments.of("mla_use_output_gate: false while the gates exist", (Consumer<ObjectNode>) t -> t.put("mla_use_output_gate", false),
                        "mla_use_output_gate = false, but the checkpoint holds"),
                Arguments.of("latent_moe_use_norm: false while the norms exist", (Consumer<ObjectNode>) t -> t.put("latent_moe_use_norm", false),
                        "latent_moe_use_norm = false, but the checkpoint holds"),
                Arguments.of("no quantization_config for MXFP4 experts", (Consumer<ObjectNode>) t -> t.remove("quantization_config"),
                        "declares no quantization_config"),
                Arguments.of("quant_method fp8", (Consumer<ObjectNode>) t -> ((ObjectNode) t.path("quantization_config")).put("quant_method", "fp8"),
                        "quant_method = \"fp8\""),
                Arguments.of("format nvfp4", (Consumer<ObjectNode>) t -> ((ObjectNode) t.path("quantization_config")).put("format", "nvfp4"),
                        "format = \"nvfp4\""),
                Arguments.of("num_bits 8", (Consumer<ObjectNode>) t -> ((ObjectNode) t.path("quantization_config").path("config_groups").path("group_0")
                        .path("weights")).put("num_bits", 8), "num_bits = 8"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("configsThatDoNotDescribeTheWeights")
    @Feature("config against checkpoint")
    @DisplayName("a config that does not describe the checkpoint's weights is refused before a token is printed")
    void aConfigThatDoesNotDescribeTheWeightsIsRefused(String name, Consumer<ObjectNode> edit, String expected) throws IOException {
        Path model = Tamper.copy(Project.fixture("tiny-k3"), tmp.resolve("tiny"));
        Path cfg = model.resolve("config.json");
        ObjectNode root = (ObjectNode) JSON.readTree(cfg.toFile());
        edit.accept((ObjectNode) root.path("text_config"));
        Files.write(cfg, JSON.writeValueAsBytes(root));
        try (Child c = Child.k3(model.toString(), "--ids", "1,2,3", "--gen", "2", "--out", tmp.resolve("out.json").toString())) {
            int rc = c.exitCode();
            Evidence.text(name, c.transcript());
            assertTrue(rc == ExitCode.USAGE || rc == ExitCode.RUNTIME, "exit " + rc + "\n" + c.transcript());
            assertTrue(c.transcript().contains(expected), c.transcript());
            assertEquals(0, tokenRows(c.err()), "no token may be printed: " + c.transcript());
            assertFalse(Files.exists(tmp.resolve("out.json")), "no --out for a refused run");
        }
    }

    @Test
    @Feature("config against checkpoint")
    @DisplayName("k3 inspect config.json parses and validates it: an empty config exits 2 naming the missing fields, a valid one prints its summary")
    void inspectValidatesAConfig() throws IOException {
        Path empty = Files.writeString(tmp.resolve("config.json"), "{}");
        try (Child c = Child.k3("inspect", empty.toString())) {
            assertEquals(ExitCode.USAGE, c.exitCode(), c.transcript());
            assertTrue(c.transcript().contains("missing required field hidden_size"), c.transcript());
        }
        try (Child c = Child.k3("inspect", Project.fixture("mini-k3-93/config.json").toString())) {
            assertEquals(ExitCode.OK, c.exitCode(), c.transcript());
            assertTrue(c.transcript().contains("hidden=40 layers=93 vocab=160"), c.transcript());
        }
    }

    // ---------------------------------------------------------------------------------------------
    // faults during a run

    @Test
    @Feature("runs")
    @DisplayName("a shard truncated during a plain (memory-mapped) run: RUN INVALID, exit 4, naming the file, no token after the fault")
    void aShardTruncatedDuringAPlainRun() throws IOException {
        Path model = Tamper.copy(Project.fixture("tiny-k3"), tmp.resolve("tiny"));
        Path out = tmp.resolve("run.json");
        try (Child c = Child.k3(model.toString(), "--ids", "1,2,3", "--gen", "3000", "--incremental", "--threads", "1", "--out", out.toString())) {
            assertTrue(c.awaitErr(FaultsGate::isTokenRow), "the run printed no token before the fault:\n" + c.transcript());
            truncateShards(model);
            int rc = c.exitCode();
            Evidence.text("run", c.transcript());
            assertEquals(ExitCode.RUN_INVALID, rc, c.transcript());
            // a mapped tensor faults (named by the size check) or an expert read comes up short (named by the drop): either way the file is named
            assertTrue(c.transcript().contains("RUN INVALID") && c.transcript().contains(".safetensors"), c.transcript());
            assertFalse(c.transcript().contains("InternalError") || c.transcript().contains("\tat "), "no stack trace:\n" + c.transcript());
            assertTrue(tokenRows(c.err()) < 3000, c.transcript());
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && c.out().isEmpty(), "no generated ids after a fault:\n" + c.transcript());
        }
    }

    @Test
    @Feature("runs")
    @DisplayName("a shard truncated during a streamed run (a failing expert read): RUN INVALID, exit 4, no token after the fault")
    void aShardTruncatedDuringAStreamedRun() throws IOException {
        Path model = Tamper.copy(Project.fixture("tiny-k3"), tmp.resolve("tiny"));
        Path trunk = pack(model);
        try (Child c = Child.k3(model.toString(), "--ids", "1,2,3", "--gen", "3000", "--incremental", "--threads", "1", "--trunk", trunk.toString(),
                "--trunk-gb", "0.001", "--cache-gb", "0.0001", "--out", tmp.resolve("run.json").toString())) {
            assertTrue(c.awaitErr(FaultsGate::isTokenRow), "the run printed no token before the fault:\n" + c.transcript());
            truncateShards(model);
            int rc = c.exitCode();
            Evidence.text("run", c.transcript());
            assertEquals(ExitCode.RUN_INVALID, rc, c.transcript());
            assertTrue(c.transcript().contains("RUN INVALID"), c.transcript());
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && c.out().isEmpty(), c.transcript());
        }
    }

    @Test
    @Feature("trunk")
    @DisplayName("trunk.bin zeroed (100 KB) before a run, or its manifest CRC set to 0: RUN INVALID, exit 4, no token")
    void aZeroedOrMislabelledTrunkIsRunInvalid() throws IOException {
        Path model = Project.fixture("tiny-k3");
        Path trunk = pack(model);
        try (FileChannel ch = FileChannel.open(trunk.resolve("trunk.bin"), StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(100_000), 0);
        }
        assertRunInvalid(model, trunk, "CRC-32C");
        Path relabelled = pack(model);
        Path json = relabelled.resolve("trunk.json");
        Files.writeString(json, Files.readString(json).replaceFirst("\"crc32c\" *: *\"[0-9a-f]{8}\"", "\"crc32c\":\"00000000\""));
        assertRunInvalid(model, relabelled, "CRC-32C");
    }

    @Test
    @Feature("trunk")
    @DisplayName("trunk.bin bytes replaced during a streamed run: the next ring read fails its CRC, RUN INVALID, exit 4, no token after")
    void trunkBytesReplacedDuringARunAreCaught() throws IOException {
        Path model = Project.fixture("tiny-k3");
        Path trunk = pack(model);
        try (Child c = Child.k3(model.toString(), "--ids", "1,2,3", "--gen", "3000", "--incremental", "--threads", "1", "--trunk", trunk.toString(),
                "--trunk-gb", "0.001", "--trunk-ring", "2", "--cache-gb", "0.01", "--out", tmp.resolve("run.json").toString())) {
            assertTrue(c.awaitErr(FaultsGate::isTokenRow), "the run printed no token before the fault:\n" + c.transcript());
            byte[] junk = new byte[64 << 10];
            java.util.Arrays.fill(junk, (byte) 0x5A);
            try (FileChannel ch = FileChannel.open(trunk.resolve("trunk.bin"), StandardOpenOption.WRITE)) {
                for (long at = 0; at < ch.size(); at += junk.length) ch.write(ByteBuffer.wrap(junk), at);
            }
            int rc = c.exitCode();
            Evidence.text("run", c.transcript());
            assertEquals(ExitCode.RUN_INVALID, rc, c.transcript());
            assertTrue(c.transcript().contains("CRC-32C"), c.transcript());
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && c.out().isEmpty(), c.transcript());
        }
    }

    // ---------------------------------------------------------------------------------------------
    // outputs: a full disk (the child's regular-file writes limited by ulimit -f) and SIGKILL

    static Stream<Arguments> outputs() {
        return Stream.of(
                Arguments.of("--out", List.of("--out", "OUT/run.json"), "run.json", "--out"),
                Arguments.of("--dump-logits", List.of("--dump-logits", "OUT/logits.bin", "--out", "OUT/run.json"), "logits.bin", "--dump-logits"),
                // the report is written before the trace: the full disk stops the run at --out, and no trace file appears either
                Arguments.of("--dump-cache-trace", List.of("--dump-cache-trace", "OUT/trace", "--cache-gb", "0.01", "--out", "OUT/run.json"), "trace/expert_trace.bin", "--out"),
                Arguments.of("--chart", List.of("conform", "MINI", "--no-logits", "--layers", "40", "--chart", "OUT/chart.svg"), "chart.svg", "--chart"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("outputs")
    @Feature("outputs")
    @DisplayName("a full disk under an output: exit 1 naming the path and the cause, no file and no temporary left behind")
    void aFullDiskUnderAnOutputLeavesNothing(String option, List<String> args, String file, String failing) throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("out"));
        List<String> a = new java.util.ArrayList<>();
        if (!args.getFirst().equals("conform")) a.addAll(List.of(Project.fixture("tiny-k3").toString(), "--ids", "1,2,3", "--gen", "2"));
        for (String x : args) a.add(x.replace("OUT", dir.toString()).replace("MINI", Project.fixture("mini-k3-93").toString()));
        try (Child c = Child.k3Limited(0, a.toArray(String[]::new))) {
            int rc = c.exitCode();
            Evidence.text(option, c.transcript());
            assertEquals(ExitCode.RUNTIME, rc, c.transcript());
            assertTrue(c.transcript().contains("cannot write " + dir) && c.transcript().contains("(" + failing + ")")
                    && c.transcript().contains("File too large"), c.transcript());
            assertFalse(Files.exists(dir.resolve(file)), file + " was left behind");
            try (Stream<Path> left = Files.walk(dir)) {
                List<Path> files = left.filter(Files::isRegularFile).toList();
                assertTrue(files.stream().allMatch(p -> sizeOf(p) > 0 && !p.getFileName().toString().endsWith(".tmp")),
                        "a 0-byte or temporary file was left: " + files);
            }
        }
    }

    @Test
    @Feature("outputs")
    @DisplayName("an output into a missing folder is refused before the model is read: exit 2, naming the path, no token printed")
    void anOutputIntoAMissingFolderIsRefusedUpFront() {
        for (String option : List.of("--out", "--dump-logits")) {
            try (Child c = Child.k3(Project.fixture("tiny-k3").toString(), "--ids", "1,2,3", "--gen", "2", option, tmp.resolve("missing/x").toString())) {
                assertEquals(ExitCode.USAGE, c.exitCode(), c.transcript());
                assertTrue(c.transcript().contains("cannot write " + tmp.resolve("missing/x") + " (" + option + "): its folder"), c.transcript());
                assertEquals(0, tokenRows(c.err()), c.transcript());
            }
        }
    }

    @Test
    @Feature("outputs")
    @DisplayName("SIGKILL in the middle of writing an output leaves no complete-looking file")
    void aKillDuringAnOutputWriteLeavesNoOutput() throws IOException {
        Path target = tmp.resolve("logits.bin");
        try (Child c = Child.main(null, SlowOutput.class.getName(), target.toString())) {
            assertTrue(c.awaitOut("writing"::equals), c.transcript());
            assertEquals(137, c.kill());
        }
        assertFalse(Files.exists(target), "a killed write left " + target);
    }

    @Test
    @Feature("trunk")
    @DisplayName("SIGKILL during pack-trunk leaves either no trunk.json or a whole, valid trunk; the next pack completes it")
    void aKillDuringPackTrunkLeavesNoHalfTrunk() throws IOException {
        Path model = Project.fixture("mini-k3-93");
        int midPack = 0;
        for (int attempt = 0; attempt < 4 && midPack == 0; attempt++) {
            Path out = tmp.resolve("trunk-" + attempt);
            try (Child c = Child.k3("pack-trunk", model.toString(), out.toString())) {
                Path journal = out.resolve("trunk.bin.journal");
                long end = System.nanoTime() + 60_000_000_000L;
                while (System.nanoTime() < end && !(Files.exists(journal) && sizeOf(journal) > 0) && !Files.exists(out.resolve("trunk.json"))) Thread.onSpinWait();
                c.kill();
            }
            if (Files.exists(out.resolve("trunk.json"))) {
                TrunkManifest.read(out);   // finished before the kill: it must be whole
            } else {
                midPack++;
                assertFalse(Files.exists(out.resolve("trunk.bin")), "a killed pack left trunk.bin without trunk.json");
                try (Child again = Child.k3("pack-trunk", model.toString(), out.toString())) {
                    assertEquals(ExitCode.OK, again.exitCode(), again.transcript());
                }
                assertEquals(93, TrunkManifest.read(out).layerCount());
            }
        }
        assertTrue(midPack > 0, "no kill landed during the pack in 4 attempts");
    }

    // ---------------------------------------------------------------------------------------------

    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    private static Arguments special(String name, String file, boolean fifo) {
        return Arguments.of(name, file, fifo);
    }

    /** Links to /dev/zero made by the cases; removed after each, so the temp folder's cleanup never meets one (JUnit warns on each). */
    private static final java.util.Queue<Path> DEVICE_LINKS = new java.util.concurrent.ConcurrentLinkedQueue<>();

    @org.junit.jupiter.api.AfterEach
    void removeDeviceLinks() throws IOException {
        for (Path l; (l = DEVICE_LINKS.poll()) != null; ) Files.deleteIfExists(l);
    }

    private static void replaceWithSpecial(Path p, boolean fifo) throws IOException {
        Files.deleteIfExists(p);
        if (fifo) {
            try {
                assertEquals(0, new ProcessBuilder("mkfifo", p.toString()).inheritIO().start().waitFor(), "mkfifo failed");
            } catch (InterruptedException e) {
                throw new IOException(e);
            }
        } else {
            Files.createSymbolicLink(p, Path.of("/dev/zero"));
            DEVICE_LINKS.add(p);
        }
    }

    private Path pack(Path model) {
        Path out = tmp.resolve("trunk-" + System.nanoTime());
        k3j.io.CheckpointIndex index = k3j.io.CheckpointIndex.open(model);
        k3j.trunk.TrunkPacker.pack(index, k3j.trunk.TrunkPacker.layout(index, true), out, k3j.trunk.Progress.silent(), s -> {}, null);
        return out;
    }

    private void assertRunInvalid(Path model, Path trunk, String expected) {
        try (Child c = Child.k3(model.toString(), "--ids", "1,2,3", "--gen", "2", "--trunk", trunk.toString(), "--trunk-gb", "0.001",
                "--cache-gb", "0.01", "--out", tmp.resolve("run.json").toString())) {
            int rc = c.exitCode();
            Evidence.text("run", c.transcript());
            assertEquals(ExitCode.RUN_INVALID, rc, c.transcript());
            assertTrue(c.transcript().contains(expected), c.transcript());
            assertEquals(0, tokenRows(c.err()), "no token from a corrupt trunk:\n" + c.transcript());
        }
    }

    /** Halves every shard of a model in place (the memory maps of a running child see the loss). */
    private static void truncateShards(Path model) throws IOException {
        try (Stream<Path> s = Files.list(model)) {
            for (Path p : s.filter(f -> f.toString().endsWith(".safetensors")).toList()) {
                try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
                    ch.truncate(ch.size() / 2);
                }
            }
        }
    }

    private static boolean isTokenRow(String line) {
        return line.matches("^\\d+\\s+\\d+\\s+\\d+\\s+[0-9.]+\\s.*");
    }

    private static long tokenRows(List<String> out) {
        return out.stream().filter(FaultsGate::isTokenRow).count();
    }

    private static long sizeOf(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            return -1;
        }
    }

    // ---------------------------------------------------------------------------------------------

    private static Arguments refused(String name, Consumer<Path> tamper, String expected) {
        return Arguments.of(name, tamper, expected);
    }

    private Path tamperedDump(Consumer<Path> tamper) {
        Path d = Tamper.copy(Project.dump("mini-k3-93"), tmp.resolve("dump"));
        tamper.accept(d);
        return d;
    }

    private static Model mini;
    private static Workers workers;

    @BeforeAll
    static void bindTheOracleOnce() {
        workers = Workers.of(1);
        mini = Model.open(Project.fixture("mini-k3-93"));
    }

    @AfterAll
    static void close() {
        if (mini != null) mini.close();
        if (workers != null) workers.close();
    }

    /** Layer {@code layer} of the (shared, untouched) oracle against a dump, checked as {@code k3 conform} checks it. */
    private static LayerReport layer(Path dump, int layer) {
        return Conformance.of(mini.forward(workers), ReferenceDump.open(dump)).layer(layer);
    }
}
