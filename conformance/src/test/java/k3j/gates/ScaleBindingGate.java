package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Comparator;
import java.util.Locale;
import java.util.stream.Stream;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.ScaleFixture;
import k3j.harness.ScaleTrunk;
import k3j.harness.Tamper;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.model.DecodeState;
import k3j.state.Binding;
import k3j.state.StateException;
import k3j.state.StateFile;
import k3j.trunk.DataBinding;
import k3j.trunk.ShardWitness;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: at the released widths too, a packed trunk and a saved state bind to the checkpoint's data. A copy of the
 * scale fixture whose layer-1 shard differs from the original in ONE byte in the middle of the layer's largest
 * trunk tensor (its other shards the same files, linked) is refused by the trunk packed from the original, naming
 * layer 1 and the tensor, before any token; a state saved against the original is refused by the copy; and the
 * trunk witness that conform and bisect run on every layer they judge finds the copy's L1, its cost measured per
 * layer kind and extrapolated to the released 108.8 GB trunk (a figure, never an assertion).
 *
 * <p>Data: the scale fixture ({@link ScaleFixture#underTest()}), the trunk packed from it ({@link ScaleTrunk}, the
 * one the other scale gates stream), the copy under {@code build/scale-binding} (one sparse shard copy, deleted
 * after the class); {@code -Dk3.scratch=DIR} puts both under DIR instead.
 */
@Tag("scale")
@Epic("scale: the released widths")
class ScaleBindingGate {
    static Path model, trunk, copy;
    static TensorInfo flipped;
    static ModelConfig config;

    @BeforeAll
    static void prepare() throws IOException, InterruptedException {
        model = ScaleFixture.underTest().dir();
        config = ConfigReader.read(model.resolve("config.json"));
        // build/ by default (the scale conformance gate streams the same trunk); -Dk3.scratch=DIR puts the trunk and the copy elsewhere
        Path scratch = Path.of(System.getProperty("k3.scratch", Project.root().resolve("build").toString()));
        trunk = ScaleTrunk.of(model);
        CheckpointIndex index = CheckpointIndex.open(model);
        // the copy: every file linked to the original but the shard holding layer 1's largest trunk tensor, copied sparse
        flipped = index.tensors().stream().filter(t -> t.name().contains(".layers.1.") && !t.name().contains(".experts."))
                .max(Comparator.comparingLong(TensorInfo::length)).orElseThrow();
        copy = scratch.resolve("scale-binding");
        deleteCopy();
        Files.createDirectories(copy);
        try (Stream<Path> s = Files.list(model)) {
            for (Path p : s.toList()) {
                if (!p.getFileName().equals(flipped.file().getFileName())) Files.createSymbolicLink(copy.resolve(p.getFileName()), p.toAbsolutePath());
            }
        }
        Path shard = copy.resolve(flipped.file().getFileName());
        Process cp = new ProcessBuilder("cp", "--sparse=always", flipped.file().toString(), shard.toString()).inheritIO().start();
        assertEquals(0, cp.waitFor(), "cp --sparse=always " + flipped.file());
        Tamper.flipByte(shard, flipped.offset() + flipped.length() / 2, 0x40);
    }

    @AfterAll
    static void deleteCopy() throws IOException {
        if (copy == null || !Files.exists(copy)) return;
        try (Stream<Path> s = Files.list(copy)) {
            for (Path p : s.toList()) Files.delete(p);
        }
        Files.delete(copy);
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("the original's trunk refuses the copy with one byte flipped in L1 (fast check: the changed shard's trunk tensors re-hashed), naming L1 and the tensor")
    void aTrunkRefusesACopyWithOneFlippedByte() {
        TrunkManifest m = TrunkManifest.read(trunk);
        long t0 = System.nanoTime();
        DataBinding.Result clean = m.checkSource(CheckpointIndex.open(model));
        double cleanSeconds = (System.nanoTime() - t0) / 1e9;
        t0 = System.nanoTime();
        TrunkException e = assertThrows(TrunkException.class, () -> m.checkSource(CheckpointIndex.open(copy)));
        double refuseSeconds = (System.nanoTime() - t0) / 1e9;
        Evidence.text("refusal", e.getMessage());
        Evidence.parameter("fast check, unchanged shards", String.format(Locale.ROOT, "%.2f s (%s)", cleanSeconds, clean.line()));
        Evidence.parameter("fast check, one changed shard", String.format(Locale.ROOT, "%.2f s", refuseSeconds));
        System.out.printf(Locale.ROOT, "== trunk binding at the released widths: unchanged %.2f s, one changed shard refused in %.2f s%n", cleanSeconds, refuseSeconds);
        assertEquals(0, clean.tensorsHashed(), clean.line());
        assertEquals(1, e.layer(), e.getMessage());
        assertTrue(e.getMessage().contains(flipped.name()), e.getMessage());
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("k3 COPY --trunk T (T packed from the original) exits before any token, naming L1")
    void aRunOnTheCopyIsRefusedBeforeAnyToken() throws IOException, InterruptedException {
        ChildJvm.Result r = ChildJvm.k3(copy.toString(), "--ids", "1,2", "--gen", "1", "--trunk", trunk.toString(), "--trunk-gb", "2", "--cache-gb", "0.5",
                "--out", copy.resolve("run.json").toString());
        Evidence.text("run", r.output());
        assertNotEquals(0, r.exit(), r.output());
        assertTrue(r.output().contains("layer 1") && r.output().contains(flipped.name()), r.output());
        assertTrue(!r.output().contains("generated ids"), r.output());
    }

    @Test
    @Feature("state binding")
    @DisplayName("a state saved against the original (its trunk digest from trunk.json) is refused by the copy, and loads into the original")
    void aStateOfTheOriginalIsRefusedByTheCopy() throws IOException {
        int layers = config.layerCount();
        DecodeState st = DecodeState.create(config, layers, 2);
        st.restored(1);
        Path file = copy.resolve("original.k3state");
        StateFile.save(file, Binding.of(config, layers, CheckpointIndex.open(model), TrunkManifest.read(trunk)), new byte[32], new int[] {1}, st);
        StateFile.load(file, Binding.of(config, layers, CheckpointIndex.open(model)), DecodeState.create(config, layers, 2));   // same files: no re-hash
        long t0 = System.nanoTime();
        StateException e = assertThrows(StateException.class,
                () -> StateFile.load(file, Binding.of(config, layers, CheckpointIndex.open(copy)), DecodeState.create(config, layers, 2)));
        double seconds = (System.nanoTime() - t0) / 1e9;
        Evidence.text("refusal", e.getMessage());
        Evidence.parameter("refused in", String.format(Locale.ROOT, "%.1f s (the copy's trunk tensors re-hashed)", seconds));
        assertTrue(e.getMessage().contains("headers match, but their data does not"), e.getMessage());
    }
    @Test
    @Feature("trunk binding")
    @DisplayName("the trunk witness (what conform and bisect run on every layer they judge) passes the original's trunk, refuses the copy's L1 naming the tensor,"
            + " and its cost per layer kind, extrapolated to the released 108.8 GB trunk")
    void theWitnessComparesEveryLayerWithTheShards() throws IOException {
        TrunkManifest m = TrunkManifest.read(trunk);
        ShardWitness clean = ShardWitness.of(CheckpointIndex.open(model));
        java.util.Map<String, double[]> byKind = new java.util.TreeMap<>();   // kind -> {layers, bytes, seconds}
        try (FileChannel ch = FileChannel.open(m.bin(), StandardOpenOption.READ); Arena arena = Arena.ofConfined()) {
            MemorySegment bin = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
            for (TrunkManifest.Layer l : m.layers()) {
                MemorySegment run = bin.asSlice(l.offset(), l.nbytes());
                long t0 = System.nanoTime();
                clean.check(l, run, m.bin());
                double s = (System.nanoTime() - t0) / 1e9;
                double[] k = byKind.computeIfAbsent(kind(l), x -> new double[3]);
                k[0]++;
                k[1] += l.nbytes();
                k[2] += s;
            }
            TrunkManifest.Layer l1 = m.layer(1);
            TrunkException e = assertThrows(TrunkException.class, () -> ShardWitness.of(CheckpointIndex.open(copy)).check(l1, bin.asSlice(l1.offset(), l1.nbytes()), m.bin()));
            Evidence.text("the copy's L1", e.getMessage());
            assertEquals(1, e.layer(), e.getMessage());
            assertTrue(e.getMessage().contains(flipped.name()), e.getMessage());
        }
        assertEquals(m.layerCount(), clean.layers(), "every layer compared");
        double bytes = clean.bytes(), seconds = clean.seconds();
        StringBuilder table = new StringBuilder("kind           layers  GB/layer  s/layer  GB/s\n");
        for (var k : byKind.entrySet()) {
            double[] v = k.getValue();
            table.append(String.format(Locale.ROOT, "%-14s %6.0f  %8.3f  %7.2f  %.2f%n", k.getKey(), v[0], v[1] / v[0] / 1e9, v[2] / v[0], v[1] / v[2] / 1e9));
        }
        double released = 108.8e9;
        table.append(String.format(Locale.ROOT, "all            %6d  %8.3f  %7.2f  %.2f%nreleased trunk 108.8 GB at this rate: %.0f s (%.1f min) added to a conform that reads each layer once",
                m.layerCount(), bytes / m.layerCount() / 1e9, seconds / m.layerCount(), bytes / seconds / 1e9, released / (bytes / seconds), released / (bytes / seconds) / 60));
        Evidence.text("trunk witness cost", table.toString());
        System.out.println("== trunk witness at the released widths (load " + String.format(Locale.ROOT, "%.2f", java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage()) + "):\n" + table);
        long t0 = System.nanoTime();
        DataBinding.Result full = m.checkSource(CheckpointIndex.open(model), DataBinding.Check.FULL);
        double fullSeconds = (System.nanoTime() - t0) / 1e9;
        Evidence.parameter("--verify-trunk full", String.format(Locale.ROOT, "%.1f s: %s", fullSeconds, full.line()));
        System.out.printf(Locale.ROOT, "== --verify-trunk full at the released widths: %.1f s for %.2f GB (%s)%n", fullSeconds, full.bytesHashed() / 1e9, full.line());
    }

    /** A layer's kind from its trunk tensors: MLA (a latent kv projection) or KDA, "dense" without a routed MoE. */
    private static String kind(TrunkManifest.Layer l) {
        boolean mla = l.tensors().keySet().stream().anyMatch(n -> n.contains("kv_a_proj"));
        boolean moe = l.tensors().keySet().stream().anyMatch(n -> n.contains(".block_sparse_moe."));
        return (mla ? "MLA" : "KDA") + (moe ? "" : " dense");
    }
}
