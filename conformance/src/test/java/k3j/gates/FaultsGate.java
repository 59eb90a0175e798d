package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.cli.ExitCode;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.harness.Caught;
import k3j.harness.Child;
import k3j.harness.Evidence;
import k3j.harness.OracleLayers;
import k3j.harness.PackedTrunk;
import k3j.harness.Project;
import k3j.harness.SlowOutput;
import k3j.harness.Tamper;
import k3j.kernels.Workers;
import k3j.model.Model;
import k3j.trunk.TrunkManifest;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
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
@Execution(ExecutionMode.CONCURRENT)   // each case has its own copy and child processes: one per core
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
        k3j.compare.StageMetric w = r.worst();
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
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && streamedOnlyStepsBeforeTheFault(c), "no generated ids after a fault:\n" + c.transcript());
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
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && streamedOnlyStepsBeforeTheFault(c), c.transcript());
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
            assertTrue(c.err().stream().noneMatch(l -> l.startsWith("generated ids:")) && streamedOnlyStepsBeforeTheFault(c), c.transcript());
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
    // files named on the command line (docs/files.md): an output never destroys a device, an input or another
    // output; an input is refused by type and size before it is opened or allocated; a refusal names the file,
    // the flag and the fix, with the documented exit code, never a Java class name or a stack trace

    /** One hostile command line, made in a scratch folder: its arguments, stdin, file-size limit, and what must hold after it. */
    record Hostile(List<String> args, byte[] stdin, Integer fileSizeKb, int exit, List<String> says, List<String> never, Survives survives) {
        Hostile(List<String> args, int exit, String... says) {
            this(args, new byte[0], null, exit, List.of(says), List.of(), () -> {});
        }

        Hostile stdin(byte[] in) {
            return new Hostile(args, in, fileSizeKb, exit, says, never, survives);
        }

        Hostile limited(int kb) {
            return new Hostile(args, stdin, kb, exit, says, never, survives);
        }

        Hostile never(String... words) {
            return new Hostile(args, stdin, fileSizeKb, exit, says, List.of(words), survives);
        }

        Hostile survives(Survives s) {
            return new Hostile(args, stdin, fileSizeKb, exit, says, never, s);
        }
    }

    @FunctionalInterface
    interface Survives {
        void check() throws IOException;
    }

    @FunctionalInterface
    interface Make {
        Hostile in(Path dir) throws IOException;
    }

    static Stream<Arguments> hostileCommandLines() {
        return Stream.of(
                // outputs that would destroy data
                hostile("--out onto a character device (a node like /dev/null)", d -> {
                    Path dev = device(d.resolve("null"));
                    return new Hostile(run(d, "--out", dev.toString()), ExitCode.USAGE, "(--out)", "an output must be a regular file").survives(stillSpecial(dev));
                }),
                hostile("--dump-logits onto a character device", d -> {
                    Path dev = device(d.resolve("null"));
                    return new Hostile(run(d, "--dump-logits", dev.toString()), ExitCode.USAGE, "(--dump-logits)", "an output must be a regular file")
                            .survives(stillSpecial(dev));
                }),
                hostile("conform --json onto a character device", d -> {
                    Path dev = device(d.resolve("null"));
                    return new Hostile(List.of("conform", Project.fixture("mini-k3-93").toString(), "--no-logits", "--layers", "40", "--json", dev.toString()),
                            ExitCode.USAGE, "(--json)", "an output must be a regular file").survives(stillSpecial(dev));
                }),
                hostile("--out onto a FIFO", d -> {
                    Path fifo = d.resolve("fifo");
                    replaceWithSpecial(fifo, true);
                    return new Hostile(run(d, "--out", fifo.toString()), ExitCode.USAGE, "is a FIFO", "(--out)").survives(stillSpecial(fifo));
                }),
                hostile("--out onto a shard of the model", d -> onto(d, "--out", "model-00001-of-00002.safetensors")),
                hostile("--out onto the model's config.json", d -> onto(d, "--out", "config.json")),
                hostile("--dump-logits onto the model's index.json", d -> onto(d, "--dump-logits", "model.safetensors.index.json")),
                hostile("--save-state onto a shard of the model", d -> onto(d, "--save-state", "model-00002-of-00002.safetensors")),
                hostile("--out onto a hard link to a shard", d -> {
                    Path model = tiny(d), link = d.resolve("run.json");
                    Files.createLink(link, model.resolve("model-00001-of-00002.safetensors"));
                    return new Hostile(run(model, d, "--out", link.toString()), ExitCode.USAGE, "an input of this command").survives(unchanged(model));
                }),
                hostile("--save-state and --history on one file", d -> new Hostile(chat(d, "--save-state", d.resolve("h.jsonl").toString(), "--history",
                        d.resolve("h.jsonl").toString()), ExitCode.USAGE, "(--save-state)", "it is --history")),
                hostile("--out and --dump-logits on one file", d -> new Hostile(run(d, "--out", d.resolve("x").toString(), "--dump-logits", d.resolve("x").toString()),
                        ExitCode.USAGE, "is also named by --out")),
                hostile("--out and --history on one file", d -> new Hostile(chat(d, "--out", d.resolve("h.jsonl").toString(), "--history", d.resolve("h.jsonl").toString()),
                        ExitCode.USAGE, "(--out)", "it is --history")),
                hostile("tokenize --output on a full disk keeps the previous output", d -> {
                    Path prev = Files.writeString(d.resolve("ids.txt"), "1,2,3\n");
                    Path text = Files.writeString(d.resolve("text.txt"), "hello world ".repeat(2000));
                    return new Hostile(List.of("tokenize", "--tok", Project.fixture("tiny-k3").toString(), "--file", text.toString(), "--output", prev.toString()),
                            ExitCode.RUNTIME, "cannot write " + prev, "File too large").limited(1).survives(unchangedFolder(d));
                }),
                hostile("--dump-activations on a full disk keeps the previous candidate whole", d -> {
                    Path cand = Files.createDirectories(d.resolve("cand"));
                    Files.writeString(cand.resolve("manifest.json"), "{\"format\": \"k3-candidate\", \"format_version\": 1}");
                    Files.write(cand.resolve("logits.bin"), new byte[640]);
                    return new Hostile(List.of(Project.fixture("mini-k3-93").toString(), "--ids", "150,17,101,3,149,64,128,42", "--gen", "1", "--out",
                            d.resolve("run.json").toString(), "--dump-activations", cand.toString()), ExitCode.RUNTIME, "cannot write " + cand, "File too large")
                            .limited(64).survives(unchangedFolder(d));
                }),
                // inputs read without bounds
                hostile("--history is a FIFO", d -> special(d, "h.jsonl", true, p -> chat(d, "--history", p), "is a FIFO", "--history")),
                hostile("--history is /dev/zero", d -> special(d, "h.jsonl", false, p -> chat(d, "--history", p), "a character device", "--history")),
                hostile("--history is 3 GB", d -> huge(d, "h.jsonl", p -> chat(d, "--history", p), "--history")),
                hostile("--prompt-file is a FIFO", d -> special(d, "p.txt", true, p -> promptFile(d, p), "is a FIFO", "--prompt-file")),
                hostile("--prompt-file is /dev/zero", d -> special(d, "p.txt", false, p -> promptFile(d, p), "a character device", "--prompt-file")),
                hostile("--prompt-file is 3 GB", d -> huge(d, "p.txt", p -> promptFile(d, p), "--prompt-file")),
                hostile("tokenize --file is a FIFO", d -> special(d, "t.txt", true, p -> tokenize(p), "is a FIFO", "--file")),
                hostile("tokenize --file is 3 GB", d -> huge(d, "t.txt", p -> tokenize(p), "--file")),
                hostile("tiktoken.model is a FIFO", d -> {
                    Path tok = tokenizerCopy(d);
                    replaceWithSpecial(tok.resolve("tiktoken.model"), true);
                    return new Hostile(List.of("tokenize", "--tok", tok.toString()), ExitCode.RUNTIME, "tiktoken.model is a FIFO", "not a regular file");
                }),
                hostile("tiktoken.model is 3 GB", d -> {
                    Path tok = tokenizerCopy(d);
                    sparse(tok.resolve("tiktoken.model"), 3L << 30);
                    return new Hostile(List.of("tokenize", "--tok", tok.toString()), ExitCode.RUNTIME, "tiktoken.model is 3221225472 bytes, more than");
                }),
                hostile("compare-logits FILE is a FIFO", d -> special(d, "l.bin", true, p -> compareLogits(p), "is a FIFO", "a logit file")),
                hostile("compare-logits FILE is /dev/zero", d -> special(d, "l.bin", false, p -> compareLogits(p), "a character device", "a logit file")),
                hostile("compare-logits FILE is 3 GB", d -> huge(d, "l.bin", p -> compareLogits(p), "a logit file")),
                hostile("--load-state is a FIFO", d -> special(d, "s.state", true, p -> run(d, "--incremental", "--load-state", p), "is a FIFO", "--load-state")),
                hostile("--load-state is a folder", d -> {
                    Path s = Files.createDirectories(d.resolve("s.state"));
                    return new Hostile(run(d, "--incremental", "--load-state", s.toString()), ExitCode.USAGE, "is a directory", "--load-state").never("no such file");
                }),
                hostile("a state header declaring 2^24 ids in a short file", d -> new Hostile(run(d, "--incremental", "--load-state", state(d, 1 << 24, 0).toString()),
                        ExitCode.USAGE, "the header declares 16777216 ids")),
                hostile("a state header declaring 2^24 ids in a 64 MB file", d -> new Hostile(run(d, "--incremental", "--load-state",
                        state(d, 1 << 24, 80L << 20).toString()), ExitCode.USAGE, "holds 16777216 ids, more than the")),
                hostile("a 2 MB chat line", d -> new Hostile(chat(d), ExitCode.USAGE, "positions", "not fed").stdin(line(2 << 20))),
                hostile("a chat message over max_position_embeddings, as --prompt-file refuses it", d -> {
                    byte[] text = words(5000);
                    Path p = Files.write(d.resolve("p.txt"), text);
                    try (Child c = Child.k3(promptFile(d, p.toString()).toArray(String[]::new))) {
                        assertEquals(ExitCode.USAGE, c.exitCode(), c.transcript());
                        assertTrue(c.transcript().contains("max_position_embeddings is 4096"), c.transcript());
                    }
                    return new Hostile(chat(d), ExitCode.USAGE, "more than the 4096 positions of the config's max_position_embeddings")
                            .stdin(java.util.Arrays.copyOf(text, text.length + 1));
                }),
                hostile("sim-cache --slots 2147483647", d -> new Hostile(simCache(d, "--slots", "2147483647"), ExitCode.USAGE, "--slots 2147483647 is more than the pool")),
                hostile("sim-cache --capacities 1e308", d -> new Hostile(simCache(d, "--capacities", "1e308"), ExitCode.USAGE, "holds more than the pool")),
                hostile("sim-cache --capacities Infinity", d -> new Hostile(simCache(d, "--capacities", "Infinity"), ExitCode.USAGE, "must be positive and finite")),
                hostile("a trace naming layer 999", d -> new Hostile(simCache(trace(d, 999, 1)), ExitCode.USAGE, "names layer 999")),
                hostile("a trace naming expert 999999", d -> new Hostile(simCache(trace(d, 5, 999999)), ExitCode.USAGE, "names expert 999999")),
                hostile("a trace naming the dense layer 0", d -> new Hostile(simCache(trace(d, 0, 3)), ExitCode.USAGE, "names layer 0, which is not a routed-MoE layer")),
                // messages that hide the cause
                hostile("num_expert_group: 1e400", d -> config(d, "{\"num_expert_group\": 1e400,", "num_expert_group")),
                hostile("a root hidden_size of 1e400", d -> config(d, "{\"hidden_size\": 1e400,", "hidden_size")),
                hostile("config.json is a FIFO", d -> specialConfig(d, c -> replaceWithSpecial(c, true), "config.json is a FIFO")),
                hostile("config.json is a folder", d -> specialConfig(d, Files::createDirectory, "config.json is a directory")),
                hostile("config.json is /dev/zero", d -> specialConfig(d, c -> replaceWithSpecial(c, false), "config.json is a character device")),
                hostile("a dump's moe_idx out of range", d -> {
                    Path dump = Tamper.copy(Project.dump("mini-k3-93"), d.resolve("dump"));
                    byte[] idx = Files.readAllBytes(dump.resolve("layers.40.moe_idx.bin"));
                    ByteBuffer.wrap(idx).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(4, 999999);
                    Tamper.replace(dump, "layers.40.moe_idx", idx);
                    // a dump that is not this model's is refused: the verdict REFUSED and its exit 2 (docs/semantics.md §10.11)
                    return new Hostile(List.of("conform", Project.fixture("mini-k3-93").toString(), "--reference", dump.toString(), "--no-logits", "--layers", "40"),
                            ExitCode.USAGE, "layers.40.moe_idx[0][1] = 999999, but the model has", "VERDICT: REFUSED").never("out of bounds");
                }),
                hostile("pack-trunk into /proc", d -> new Hostile(List.of("pack-trunk", Project.fixture("mini-k3-93").toString(), "/proc/k3j-x"), ExitCode.RUNTIME,
                        "/proc/k3j-x")),
                hostile("pack-trunk on a full disk", d -> new Hostile(List.of("pack-trunk", Project.fixture("mini-k3-93").toString(), d.resolve("trunk").toString()),
                        ExitCode.RUNTIME, "File too large").limited(64)),
                hostile("conform on a model with a missing shard", d -> {
                    Path mini = Tamper.copy(Project.fixture("mini-k3-93"), d.resolve("mini"));
                    Files.delete(mini.resolve("model-00003-of-00007.safetensors"));
                    return new Hostile(List.of("conform", mini.toString(), "--no-logits", "--layers", "40"), ExitCode.RUNTIME, "partial download")
                            .never("[reference mismatch]");
                }),
                hostile("conform --candidate on a missing folder", d -> new Hostile(List.of("conform", "--candidate", d.resolve("missing").toString()), ExitCode.USAGE,
                        "no such file or folder").never("[reference mismatch]")));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("hostileCommandLines")
    @Feature("hostile files")
    @DisplayName("a hostile file or path on the command line is refused before it is opened, allocated or replaced, naming it and the fix")
    @Timeout(value = 120, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
    void aHostileFileOrPathIsRefusedNamingIt(String name, Make make) throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("case"));
        Hostile h = make.in(dir);
        String[] args = h.args().toArray(String[]::new);
        try (Child c = (h.fileSizeKb() == null ? Child.k3(args) : Child.k3Limited(h.fileSizeKb(), args)).stdin(h.stdin())) {
            int rc = c.exitCode();
            String t = c.transcript();
            Evidence.text(name, t);
            assertEquals(h.exit(), rc, t);
            for (String w : h.says()) assertTrue(t.contains(w), "expected '" + w + "':\n" + t);
            for (String w : h.never()) assertFalse(t.contains(w), "'" + w + "' must not be said:\n" + t);
            assertFalse(t.contains("\tat ") || JAVA_NAME.matcher(t).find(), "a Java class name or a stack trace reached the user:\n" + t);
        }
        h.survives().check();
    }

    @Test
    @Feature("hostile files")
    @DisplayName("bin/k3's stderr filter passes a message with a NUL byte whole and drops only the incubator warning")
    void theStderrFilterPassesBinaryBytes() throws IOException, InterruptedException {
        String script = Files.readString(Project.root().resolve("bin/k3"));
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("trap '' INT; (grep [^\\n]*?) >&2\\)").matcher(script);
        assertTrue(m.find(), "bin/k3 has no stderr filter of the expected form");
        Process p = new ProcessBuilder("bash", "-c", m.group(1)).start();
        try (var in = p.getOutputStream()) {
            in.write("k3: tiktoken.model line 3: a\0b is not base64\nWARNING: Using incubator modules: jdk.incubator.vector\nlast\n".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        }
        String got = new String(p.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        p.waitFor();
        Evidence.text("filtered", got);
        assertEquals("k3: tiktoken.model line 3: a\0b is not base64\nlast\n", got);
    }

    private static final java.util.regex.Pattern JAVA_NAME = java.util.regex.Pattern.compile("\\bjava\\.[a-z]+\\.|\\b[A-Z][A-Za-z]*(Exception|Error)\\b");

    private static Arguments hostile(String name, Make make) {
        return Arguments.of(name, make);
    }

    /** A run of the tiny model (a fresh copy in {@code d}) with {@code more}. */
    private static List<String> run(Path d, String... more) throws IOException {
        return run(tiny(d), d, more);
    }

    private static List<String> run(Path model, Path d, String... more) {
        List<String> a = new java.util.ArrayList<>(List.of(model.toString(), "--ids", "1,2,3", "--gen", "1"));
        a.addAll(List.of(more));
        if (!a.contains("--out")) a.addAll(List.of("--out", d.resolve("run.json").toString()));
        return a;
    }

    private static List<String> chat(Path d, String... more) throws IOException {
        Path model = tiny(d);
        List<String> a = new java.util.ArrayList<>(List.of(model.toString(), "--tok", model.toString(), "--chat", "--think", "off", "--gen", "2"));
        a.addAll(List.of(more));
        if (!a.contains("--out")) a.addAll(List.of("--out", d.resolve("run.json").toString()));
        return a;
    }

    private static List<String> promptFile(Path d, String file) throws IOException {
        Path model = tiny(d);
        return List.of(model.toString(), "--tok", model.toString(), "--prompt-file", file, "--gen", "1", "--out", d.resolve("run.json").toString());
    }

    private static List<String> tokenize(String file) {
        return List.of("tokenize", "--tok", Project.fixture("tiny-k3").toString(), "--file", file);
    }

    private static List<String> compareLogits(String file) {
        return List.of("compare-logits", file, "--reference", Project.dump("mini-k3-93").toString());
    }

    private static List<String> simCache(Path d, String... more) throws IOException {
        List<String> a = new java.util.ArrayList<>(List.of("sim-cache", trace(d, 1, 0).toString()));
        a.addAll(List.of(more));
        return a;
    }

    private static List<String> simCache(Path trace) {
        return List.of("sim-cache", trace.toString());
    }

    /** A trace of three valid requests of the released model and one (layer, expert) pair after them. */
    private static Path trace(Path d, int layer, int expert) throws IOException {
        ByteBuffer b = ByteBuffer.allocate(32).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        b.putInt(1).putInt(0).putInt(2).putInt(5).putInt(1).putInt(0).putInt(layer).putInt(expert);
        Path dir = Files.createDirectories(d.resolve("trace-" + layer + "-" + expert));
        Files.write(dir.resolve("expert_trace.bin"), b.array());
        return dir;
    }

    /** A copy of the tiny model in {@code d} (made once per case). */
    private static Path tiny(Path d) throws IOException {
        Path t = d.resolve("tiny");
        return Files.isDirectory(t) ? t : Tamper.copy(Project.fixture("tiny-k3"), t);
    }

    /** An output pointed at one of the model's own files: refused, and the model is byte-for-byte what it was. */
    private static Hostile onto(Path d, String flag, String file) throws IOException {
        Path model = tiny(d);
        List<String> a = new java.util.ArrayList<>(run(model, d, flag, model.resolve(file).toString()));
        if (flag.equals("--save-state")) a.add("--incremental");
        return new Hostile(a, ExitCode.USAGE, "(" + flag + ")", "an input of this command").survives(unchanged(model));
    }

    private static Hostile special(Path d, String name, boolean fifo, Args args, String what, String flag)
            throws IOException {
        Path p = d.resolve(name);
        replaceWithSpecial(p, fifo);
        return new Hostile(args.of(p.toString()), ExitCode.USAGE, what, flag).survives(stillSpecial(p));
    }

    private static Hostile huge(Path d, String name, Args args, String flag) throws IOException {
        Path p = d.resolve(name);
        sparse(p, 3L << 30);
        return new Hostile(args.of(p.toString()), ExitCode.USAGE, "is 3221225472 bytes, more than the", flag);
    }

    private static Hostile config(Path d, String prefix, String key) throws IOException {
        Path c = tiny(d).resolve("config.json");
        Files.writeString(c, Files.readString(c).replaceFirst("\\{", java.util.regex.Matcher.quoteReplacement(prefix)));
        return new Hostile(List.of("inspect", c.toString()), ExitCode.USAGE, key).never("Infinite or NaN");
    }

    @FunctionalInterface
    interface Args {
        List<String> of(String path) throws IOException;
    }

    @FunctionalInterface
    interface Replace {
        void at(Path p) throws IOException;
    }

    private static Hostile specialConfig(Path d, Replace replace, String says) throws IOException {
        Path model = tiny(d);
        Files.delete(model.resolve("config.json"));
        replace.at(model.resolve("config.json"));
        return new Hostile(run(model, d), ExitCode.USAGE, says).never("no config.json in");
    }

    private static Path tokenizerCopy(Path d) throws IOException {
        Path tok = Files.createDirectories(d.resolve("tok"));
        for (String f : List.of("tiktoken.model", "tokenizer_config.json")) Files.copy(Project.fixture("tiny-k3/" + f), tok.resolve(f));
        return tok;
    }

    /** A state file saved by a real run of the tiny model, its id count set to {@code ids} and its length to {@code length} (0: as saved). */
    private static Path state(Path d, int ids, long length) throws IOException {
        Path s = d.resolve("saved.k3state");
        try (Child c = Child.k3(run(d, "--incremental", "--save-state", s.toString(), "--out", d.resolve("first.json").toString()).toArray(String[]::new))) {
            assertEquals(ExitCode.OK, c.exitCode(), c.transcript());
        }
        // the id count is followed by the absorbed count and the ids themselves: 4, 3, then the prompt 1, 2, 3 (int32 LE)
        byte[] all = Files.readAllBytes(s);
        ByteBuffer want = ByteBuffer.allocate(20).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(4).putInt(3).putInt(1).putInt(2).putInt(3);
        int at = -1;
        for (int i = 0; i + 20 <= all.length && at < 0; i++) if (java.util.Arrays.equals(all, i, i + 20, want.array(), 0, 20)) at = i;
        assertTrue(at > 0, "no id count in the saved state " + s);
        try (FileChannel ch = FileChannel.open(s, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(4).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(0, ids), at);
            if (length > 0) ch.write(ByteBuffer.allocate(1), length - 1);
        }
        return s;
    }

    private static byte[] line(int bytes) {
        byte[] b = words(bytes / 6 + 1);
        b = java.util.Arrays.copyOf(b, bytes + 1);
        for (int i = 0; i < bytes; i++) if (b[i] == 0 || b[i] == '\n') b[i] = 'a';
        b[bytes] = '\n';
        return b;
    }

    /** {@code n} short words separated by spaces (a tokenizer gives about one id each), then LF. */
    private static byte[] words(int n) {
        StringBuilder sb = new StringBuilder();
        java.util.Random r = new java.util.Random(20);
        for (int i = 0; i < n; i++) sb.append(i == 0 ? "" : " ").append((char) ('a' + r.nextInt(26))).append((char) ('a' + r.nextInt(26)));
        return (sb + "\n").getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    private static void sparse(Path p, long size) throws IOException {
        Files.deleteIfExists(p);
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(p.toFile(), "rw")) {
            f.setLength(size);
        }
    }

    /** A character device node like /dev/null (mknod, as root), or a FIFO where nodes cannot be made: either must never be replaced. */
    private static Path device(Path p) throws IOException {
        try {
            if (new ProcessBuilder("mknod", p.toString(), "c", "1", "3").start().waitFor() == 0) return p;
        } catch (InterruptedException e) {
            throw new IOException(e);
        }
        replaceWithSpecial(p, true);
        return p;
    }

    private static Survives stillSpecial(Path p) throws IOException {
        Object mode = Files.getAttribute(p, "unix:mode", java.nio.file.LinkOption.NOFOLLOW_LINKS);
        return () -> {
            assertFalse(Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS), p + " was replaced by a regular file");
            assertEquals(mode, Files.getAttribute(p, "unix:mode", java.nio.file.LinkOption.NOFOLLOW_LINKS), p + " changed its type");
        };
    }

    /** Every file of a folder, by name and sha256, must be what it is now (and no temporary appear beside them). */
    private static Survives unchangedFolder(Path dir) throws IOException {
        java.util.Map<String, String> before = digests(dir);
        return () -> assertEquals(before, digests(dir), "the files of " + dir + " changed");
    }

    private static Survives unchanged(Path model) throws IOException {
        return unchangedFolder(model);
    }

    private static java.util.Map<String, String> digests(Path dir) throws IOException {
        java.util.Map<String, String> m = new java.util.TreeMap<>();
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.filter(f -> !f.equals(dir)).toList()) {
                String rel = dir.relativize(p).toString();
                if (rel.equals("run.json") || rel.equals("first.json")) continue;   // a run's own report
                m.put(rel, Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS) ? Tamper.sha256(Files.readAllBytes(p)) : "(not a file)");
            }
        }
        return m;
    }

    // ---------------------------------------------------------------------------------------------

    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    private static Arguments special(String name, String file, boolean fifo) {
        return Arguments.of(name, file, fifo);
    }

    /**
     * Links to /dev/zero made by the cases; removed after each (its own only: the cases run side by side), so the temp
     * folder's cleanup never meets one (JUnit warns on each).
     */
    private static final java.util.Queue<Path> DEVICE_LINKS = new java.util.concurrent.ConcurrentLinkedQueue<>();

    @org.junit.jupiter.api.AfterEach
    void removeDeviceLinks() throws IOException {
        for (Path l : DEVICE_LINKS) if (l.startsWith(tmp) && DEVICE_LINKS.remove(l)) Files.deleteIfExists(l);
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
        return PackedTrunk.pack(model, tmp);
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

    /**
     * stdout streams each id as its step ends: a faulted run shows exactly the ids of the steps it completed before the
     * fault (the TOKEN column of its step rows), never one computed after it.
     */
    private static boolean streamedOnlyStepsBeforeTheFault(Child c) {
        List<String> completed = c.err().stream().filter(FaultsGate::isTokenRow).map(l -> l.trim().split("\\s+")[1]).toList();
        String streamed = String.join("", c.out()).trim();
        return (streamed.isEmpty() ? List.<String>of() : List.of(streamed.split(","))).equals(completed);
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
        return OracleLayers.tamperedDump(tmp.resolve("dump"), tamper);
    }

    private static OracleLayers oracle;

    @BeforeAll
    static void bindTheOracleOnce() {
        oracle = OracleLayers.open();
    }

    @AfterAll
    static void close() {
        if (oracle != null) oracle.close();
    }

    /** Layer {@code layer} of the (shared, untouched) oracle against a dump, checked as {@code k3 conform} checks it. */
    private static LayerReport layer(Path dump, int layer) {
        return oracle.layer(dump, layer);
    }
}
