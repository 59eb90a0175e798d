package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.harness.Evidence;
import k3j.harness.PackedTrunk;
import k3j.harness.Project;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.io.TensorReader;
import k3j.testkit.MarkedCheckpoint;
import k3j.testkit.MarkedCheckpoint.Defect;
import k3j.testkit.ReleasedLayout;
import k3j.trunk.LayerBytes;
import k3j.trunk.Progress;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPacker;
import k3j.trunk.TrunkPlan;
import k3j.trunk.TrunkStats;
import k3j.trunk.TrunkStream;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The packed trunk holds every layer's non-expert bytes exactly as the shards do, and the stream hands
 * the forward exactly those bytes under any budget (docs/semantics.md §5, §10.6; pitfalls 14, 16, 18). Every case
 * writes a small checkpoint whose every byte is a marker of (weights, layer, tensor, position)
 * ({@link MarkedCheckpoint}), packs it with the real packer, and compares what the trunk or the stream
 * gives against the shards' own bytes read through the checkpoint reader: real files, real reads.
 */
@Tag("trunk")
@Epic("trunk")
class TrunkGate {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Consumer<String> QUIET = s -> {};

    @TempDir
    Path tmp;

    // ---------------------------------------------------------------------------------------------
    // packing

    @Test
    @Feature("oracle fixtures")
    @DisplayName("mini-k3-93 (93 layers, 7 shards): each run packed from the shard its manifest names, bytes exact; streamed exactly")
    void miniK3PacksAndStreams() throws IOException {
        Path model = Project.fixture("mini-k3-93");
        JsonNode layout = Project.json(model.resolve("manifest.json")).path("layout");
        assertTrue(layout.isArray() && !layout.isEmpty(), "mini-k3-93/manifest.json has no layout");
        TrunkManifest m = pack(model, tmp.resolve("trunk"));
        assertEquals(93, m.layerCount());
        int checked = 0;
        for (JsonNode shard : layout) {
            String[] range = shard.path("trunk_layers").asText().split("\\.\\.");
            for (int l = Integer.parseInt(range[0]); l <= Integer.parseInt(range[1]); l++) {
                assertEquals(shard.path("shard").asText(), m.layer(l).shard(), "layer " + l + "'s run");
                checked++;
            }
        }
        assertEquals(93, checked, "the fixture's layout names a shard for every layer");
        checkPackedAgainstShards(model, m);
        PackedTrunk f = new PackedTrunk(model, m);
        long largest = 0;
        for (TrunkManifest.Layer l : m.layers()) largest = Math.max(largest, l.padded());
        try (TrunkStream s = f.open(2 * f.slot + 20 * largest, 2)) {
            Evidence.text("plan", s.describe());
            assertTrue(s.plan().pinnedCount() > 0 && s.plan().pinnedCount() < 93, "some layers pinned, the rest streamed");
            f.walk(s, 2, 93, false);
            Evidence.text("report", s.stats().report());
            assertEquals(186, s.stats().binds());
        }
    }

    @Test
    @Feature("oracle fixtures")
    @DisplayName("tiny-k3 (safetensors-library order): the contiguous packer refuses layer 0's gap; --gather packs it and it streams exactly")
    void tinyK3NeedsGather() throws IOException {
        Path model = Project.fixture("tiny-k3");
        TrunkException e = assertThrows(TrunkException.class, () -> pack(model, tmp.resolve("refused")));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("layer 0: is not contiguous"), e.getMessage());
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkManifest m = TrunkPacker.pack(index, TrunkPacker.layout(index, true), tmp.resolve("trunk"), Progress.silent(), QUIET, null);
        assertEquals(13, m.layerCount());
        checkPackedAgainstShards(model, m);
        PackedTrunk f = new PackedTrunk(model, m);
        try (TrunkStream s = f.open(2 * f.slot, 2)) {
            f.walk(s, 1, 13, false);
        }
    }

    @Test
    @Feature("packing")
    @DisplayName("pack: every tensor's bytes in trunk.bin equal the shard's; runs 4096-aligned, tails zero")
    void packedBytesEqualTheShards() throws IOException {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 6, 1, 1, Defect.NONE);
        TrunkManifest m = pack(model, tmp.resolve("trunk"));
        checkPackedAgainstShards(model, m);
    }

    @Test
    @Feature("packing")
    @DisplayName("pack: the released layout's names (tiny geometry, 2 shards): trunk bytes equal the shard's, experts left out")
    void releasedLayoutPacks() throws IOException {
        ReleasedLayout.Geometry g = new ReleasedLayout.Geometry(16, 32, 5, 1, new int[] {3, 4}, 2, 4, 4, 4, 2, 8, 8, 4, 4, 4,
                32, 4, 64, 64, 16, 32, 1);
        Path model = tmp.resolve("released");
        ReleasedLayout.Written w = new ReleasedLayout(g).write(model);
        CheckpointIndex index = CheckpointIndex.open(model);
        // the layout's data are holes: give every tensor marker bytes so a misplaced copy shows
        int k = 0;
        try (RandomAccessFile raf = new RandomAccessFile(w.shards().getFirst().toFile(), "rw")) {
            for (TensorInfo t : index.tensors()) {
                byte[] b = new byte[(int) t.length()];
                for (int i = 0; i < b.length; i++) b[i] = MarkedCheckpoint.marker(7, k, 3, i);
                raf.seek(t.offset());
                raf.write(b);
                k++;
            }
        }
        TrunkManifest m = pack(model, tmp.resolve("trunk"));
        assertEquals(5, m.layerCount());
        for (TrunkManifest.Layer l : m.layers()) {
            for (String name : l.tensors().keySet()) {
                assertTrue(name.startsWith("language_model.model.layers." + l.layer() + "."), name);
                assertFalse(name.contains(".block_sparse_moe.experts."), "a routed expert in the trunk: " + name);
            }
        }
        long experts = index.tensors().stream().filter(t -> t.name().contains(".block_sparse_moe.experts.")).count();
        long packed = m.layers().stream().mapToLong(l -> l.tensors().size()).sum();
        long layerTensors = index.tensors().stream().filter(t -> t.name().startsWith("language_model.model.layers.")).count();
        Evidence.parameter("trunk tensors", packed);
        Evidence.parameter("routed expert tensors left out", experts);
        assertEquals(layerTensors - experts, packed, "every non-expert layer tensor is in the trunk");
        checkPackedAgainstShards(model, m);
    }

    @Feature("packing")
    @DisplayName("pack refuses a layer whose run has a gap or spans two shards, naming the layer, the bytes and where they lie")
    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedDefects")
    void brokenLayerRunIsRefused(Defect defect) {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 4, 1, 1, defect);
        Path out = tmp.resolve("trunk");
        TrunkException e = assertThrows(TrunkException.class, () -> pack(model, out));
        Evidence.text("refusal", e.getMessage());
        CheckpointIndex index = CheckpointIndex.open(model);
        List<String> says = switch (defect) {
            case GAP_IN_LAYER_1 -> List.of("layer 1: is not contiguous", "block_sparse_moe.experts.0.w1.weight_packed", "refusing",
                    index.tensor("language_model.model.layers.1.block_sparse_moe.experts.0.w1.weight_packed").length() + " bytes of gap");
            case LAYER_1_SPANS_SHARDS -> List.of("layer 1: spans 2 shards", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors: "
                    + index.tensor("language_model.model.layers.1.block_sparse_moe.shared_experts.down_proj.weight").length() + " bytes");
            case NONE -> throw new AssertionError("NONE is not a defect the packer refuses");
        };
        for (String f : says) assertTrue(e.getMessage().contains(f), "the refusal must say \"" + f + "\": " + e.getMessage());
        assertNothingOpens(out);
    }

    @Feature("packing")
    @DisplayName("pack --gather packs, tensor by tensor, a layer the contiguous packer refuses; bytes equal the shard's; streams exactly")
    @ParameterizedTest(name = "{0}")
    @MethodSource("refusedDefects")
    void gatherPacksWhatContiguousPackingRefuses(Defect defect) throws IOException {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 4, 3, 1, defect);
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkPacker.Layout layout = TrunkPacker.layout(index, true);
        Evidence.parameter("defect", defect);
        assertTrue(layout.gathered());
        assertEquals(1, layout.pieces().get(0).size(), "layer 0 is contiguous: one range copy");
        assertTrue(layout.pieces().get(1).size() > 1, "layer 1 is gathered");
        TrunkManifest m = TrunkPacker.pack(index, layout, tmp.resolve("trunk"), Progress.silent(), QUIET, null);
        for (TrunkManifest.Tensor t : m.layer(1).tensors().values()) assertEquals(0, t.offset() % 64, t.name() + " aligned in its run");
        checkPackedAgainstShards(model, m);
        PackedTrunk f = new PackedTrunk(model, m);
        try (TrunkStream s = f.open(2 * f.slot)) {
            f.walk(s, 1, 4, false);
        }
        Path other = tmp.resolve("other");
        MarkedCheckpoint.write(other, 4, 3, 5, defect);
        assertThrows(TrunkException.class, () -> m.checkSource(CheckpointIndex.open(other)), "a gathered trunk from other weights");
    }

    static Stream<Defect> refusedDefects() {
        return Stream.of(Defect.GAP_IN_LAYER_1, Defect.LAYER_1_SPANS_SHARDS);
    }

    @Test
    @Feature("packing")
    @DisplayName("pack interrupted after layer 2 (injected failure) leaves nothing that opens, also over an older good trunk; a rerun resumes")
    void interruptedPackLeavesNothingThatOpens() throws IOException {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 6, 1, 1, Defect.NONE);
        Path out = tmp.resolve("trunk");
        pack(model, out);   // an older, good trunk in the same directory
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkPacker.pack(index, out, Progress.silent(), QUIET, layer -> {
            if (layer == 2) throw new IOException("injected: disk full after layer 2");
        }));
        Evidence.text("failure", e.getMessage());
        assertTrue(e.getMessage().contains("injected") && e.getMessage().contains("resumes"), e.getMessage());
        assertNothingOpens(out);
        assertTrue(Files.exists(out.resolve("trunk.bin.partial")) && Files.exists(out.resolve("trunk.bin.journal")), "kept for resuming");
        // a flipped byte in layer 1 of the partial file: the resume keeps layer 0 only and copies again from layer 1
        TrunkManifest.Layer l1 = TrunkPacker.layout(index).layers().get(1);
        try (RandomAccessFile raf = new RandomAccessFile(out.resolve("trunk.bin.partial").toFile(), "rw")) {
            raf.seek(l1.offset() + 5);
            int b = raf.read();
            raf.seek(l1.offset() + 5);
            raf.write(b ^ 0x40);
        }
        List<String> notes = new ArrayList<>();
        TrunkManifest m = TrunkPacker.pack(index, out, Progress.silent(), notes::add, null);
        Evidence.text("notes", String.join("\n", notes));
        assertTrue(notes.stream().anyMatch(n -> n.contains("resuming the pack after layer 0:")), "resumed after layer 0: " + notes);
        assertFalse(Files.exists(out.resolve("trunk.bin.journal")), "the journal is removed once the trunk is whole");
        checkPackedAgainstShards(model, m);
    }

    @Test
    @Feature("packing")
    @DisplayName("a pack journal that is a link, a FIFO, 3 GB or not text is refused unread (the link's target untouched); deleting it as the message says lets the pack run")
    void badJournalIsRefusedAndItsAdviceWorks() throws Exception {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 4, 1, 1, Defect.NONE);
        CheckpointIndex index = CheckpointIndex.open(model);
        Path out = Files.createDirectories(tmp.resolve("trunk"));
        Path journal = out.resolve("trunk.bin.journal"), victim = tmp.resolve("victim.txt");
        Files.writeString(victim, "someone else's file");
        Files.writeString(out.resolve("trunk.bin.partial"), "partial");
        Files.createSymbolicLink(journal, victim);
        refusedJournal(index, out, "a symbolic link");
        assertEquals("someone else's file", Files.readString(victim), "the link's target is neither read nor written");
        Files.delete(journal);
        assertEquals(0, new ProcessBuilder("mkfifo", journal.toString()).start().waitFor(), "mkfifo");
        org.junit.jupiter.api.Assertions.assertTimeoutPreemptively(java.time.Duration.ofSeconds(60), () -> refusedJournal(index, out, "a FIFO"));
        Files.delete(journal);
        try (RandomAccessFile r = new RandomAccessFile(journal.toFile(), "rw")) {
            r.setLength(3L << 30);   // sparse: 3 GB that take no disk
        }
        refusedJournal(index, out, "3221225472 bytes");
        Files.write(journal, new byte[] {'k', '3', (byte) 0xff, (byte) 0xfe, '\n'});
        String advice = refusedJournal(index, out, "not ASCII text");
        assertTrue(advice.contains("delete it and trunk.bin.partial"), advice);
        Files.delete(journal);
        Files.delete(out.resolve("trunk.bin.partial"));
        checkPackedAgainstShards(model, TrunkPacker.pack(index, out, Progress.silent(), QUIET, null));
    }

    private static String refusedJournal(CheckpointIndex index, Path out, String says) {
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkPacker.pack(index, out, Progress.silent(), QUIET, null), says);
        Evidence.text("refused: " + says, e.getMessage());
        assertTrue(e.getMessage().contains(says) && e.getMessage().contains("trunk.bin.journal") && e.getMessage().contains("run pack-trunk again"), e.getMessage());
        return e.getMessage();
    }

    @Test
    @Tag("faults")   // a killed child JVM: -Pslow, beside the other faults
    @Feature("packing")
    @DisplayName("pack killed mid-write (SIGKILL of a k3 pack-trunk process) leaves nothing that opens")
    void killedPackLeavesNothingThatOpens() throws Exception {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, 8, 3000, 1, Defect.NONE);
        Path out = tmp.resolve("trunk");
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"), "k3j.cli.K3",
                "pack-trunk", model.toString(), out.toString())
                .redirectErrorStream(true).redirectOutput(tmp.resolve("pack.log").toFile()).start();
        Path partial = out.resolve("trunk.bin.partial");
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!(Files.exists(partial) && Files.size(partial) > 0) && p.isAlive() && System.nanoTime() < deadline) Thread.sleep(1);
        assertTrue(p.isAlive(), "the pack finished before it could be killed; enlarge the checkpoint:\n" + Files.readString(tmp.resolve("pack.log")));
        p.destroyForcibly().waitFor();
        Evidence.parameter("partial bytes at kill", Files.exists(partial) ? Files.size(partial) : -1);
        assertNothingOpens(out);
        List<String> notes = new ArrayList<>();
        TrunkManifest m = TrunkPacker.pack(CheckpointIndex.open(model), out, Progress.silent(), notes::add, null);
        Evidence.text("rerun notes", String.join("\n", notes));
        checkPackedAgainstShards(model, m);
    }

    // ---------------------------------------------------------------------------------------------
    // streaming (docs/semantics.md §10.6)

    @Test
    @Feature("streaming")
    @DisplayName("one ring slot: nothing pinned, the reader thread is NOT started, prefetch is a no-op, the active layer survives")
    void oneSlotLeavesTheReaderUnstarted() throws IOException {
        PackedTrunk f = fixture(3);
        try (TrunkStream s = f.open(f.slot)) {
            Evidence.text("plan", s.describe());
            assertEquals(1, s.plan().ring());
            assertEquals(0, s.plan().pinnedCount());
            assertFalse(s.readerRunning(), "pitfall 14: a reader with one slot overwrites the layer being computed");
            try (LayerBytes b = s.acquire(0)) {
                s.awaitIdle();
                Thread.sleep(50);
                assertEquals(-1, s.slotOf(1), "nothing prefetched layer 1");
                f.checkBytes(b);
                TrunkStats st = s.stats();
                assertEquals(1, st.misses(), "the first bind is one miss");
                assertEquals(0, st.hits(), "and no hit");
                assertEquals(1, st.reads());
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            f.walk(s, 2, 3, false);
            // the only slot still held layer 0 for the first bind of the pass; every other bind reads
            assertEquals(6, s.stats().misses(), "one slot, three layers: every bind but one reads");
            assertEquals(1, s.stats().ringHits());
        }
    }

    @Test
    @Feature("streaming")
    @DisplayName("two slots: the prefetch of layer 1 lands in the OTHER slot while layer 0 is held, both bound correctly")
    void prefetchLandsInADifferentSlot() throws IOException {
        PackedTrunk f = fixture(3);
        try (TrunkStream s = f.open(2 * f.slot)) {
            assertEquals(2, s.plan().ring());
            assertTrue(s.readerRunning());
            LayerBytes b0 = s.acquire(0);
            s.awaitIdle();
            int s1 = s.slotOf(1);
            Evidence.parameter("layer 0 slot", b0.slot());
            Evidence.parameter("layer 1 slot", s1);
            assertTrue(s1 >= 0, "layer 1 was prefetched");
            assertNotEquals(b0.slot(), s1, "the prefetch must not land in the held slot");
            f.checkBytes(b0);
            b0.close();
            try (LayerBytes b1 = s.acquire(1)) {
                f.checkBytes(b1);
                assertEquals(s1, b1.slot());
            }
            TrunkStats st = s.stats();
            assertEquals(1, st.misses());
            assertEquals(1, st.ringHits(), "the prefetched layer is a hit");
        }
    }

    @Test
    @Feature("streaming")
    @DisplayName("ring wrap-around: five layers through two slots, two tokens; every bind exact, the read counts exact")
    void ringWrapsAround() throws IOException {
        PackedTrunk f = fixture(5);
        try (TrunkStream s = f.open(2 * f.slot)) {
            List<Integer> slotsUsed = f.walk(s, 2, 5, true);
            s.awaitIdle();
            Evidence.parameter("slots by bind", slotsUsed);
            TrunkStats st = s.stats();
            Evidence.text("report", st.report());
            assertEquals(10, st.binds());
            assertEquals(1, st.misses(), "only the very first bind misses: each next layer (and layer 0 after 4) was prefetched");
            // every bind read once; after the last release both slots are free, so the wrap prefetches layers 0 and 1
            assertEquals(12, st.reads());
            assertEquals(f.padded(0) * 3 + f.padded(1) * 3 + (f.padded(2) + f.padded(3) + f.padded(4)) * 2, st.bytesRead());
            for (int i = 1; i < slotsUsed.size(); i++) assertNotEquals(slotsUsed.get(i - 1), slotsUsed.get(i), "consecutive layers alternate slots");
        }
        try (TrunkStream s = f.open(2 * f.slot)) {
            f.walk(s, 3, 5, false);   // no waiting: the reader races the walk
            assertEquals(15, s.stats().binds());
        }
        // --layers 3: the walk wraps after layer 2, so layer 3 is never read and layer 0 is prefetched after 2
        long slot3 = Math.max(f.padded(0), Math.max(f.padded(1), f.padded(2)));
        try (TrunkStream s = TrunkStream.open(f.manifest, StreamOptions.budget(2 * slot3).withLayers(3).withNotes(QUIET))) {
            assertEquals(0, s.plan().pinnedCount());
            assertEquals(2, s.plan().ring());
            f.walk(s, 2, 3, true);
            s.awaitIdle();
            assertEquals(6, s.stats().binds());
            assertTrue(s.stats().bytesRead() <= 6 * slot3, "--layers 3: only layers 0..2 are read (the wrap goes to 0, not 3)");
            assertThrows(IllegalArgumentException.class, () -> s.acquire(3));
        }
    }

    @Test
    @Feature("manifest refusals")
    @DisplayName("the run's open refuses a packed trunk with fewer layers than the model, and one from other weights")
    void runOpenChecksLayersAndSource() {
        PackedTrunk f = fixture(3);
        TrunkException few = assertThrows(TrunkException.class,
                () -> TrunkStream.open(f.manifest.dir(), f.index, 4, StreamOptions.budget(2 * f.slot).withNotes(QUIET)));
        Evidence.text("too few layers", few.getMessage());
        assertTrue(few.getMessage().contains("the packed trunk has 3 layers, the run needs 4"), few.getMessage());
        Path other = tmp.resolve("other");
        MarkedCheckpoint.write(other, 3, 3, 9, Defect.NONE);
        assertThrows(TrunkException.class,
                () -> TrunkStream.open(f.manifest.dir(), CheckpointIndex.open(other), 3, StreamOptions.budget(2 * f.slot).withNotes(QUIET)));
        try (TrunkStream s = TrunkStream.open(f.manifest.dir(), f.index, 3, StreamOptions.budget(2 * f.slot).withNotes(QUIET));
             LayerBytes b = s.acquire(2)) {
            f.checkBytes(b);
        }
    }

    @Feature("streaming")
    @DisplayName("racing walk: the reader races compute of random length; every bind of every pass is exact")
    @ParameterizedTest(name = "ring {0}, pinned budget {1}")
    @MethodSource("races")
    void racingWalkStaysExact(int ring, boolean pinSome) throws Exception {
        PackedTrunk f = fixture(7);
        long budget = ring * f.slot + (pinSome ? f.padded(0) + f.padded(3) : 0);
        java.util.Random rnd = new java.util.Random(ring * 31L + (pinSome ? 1 : 0));
        try (TrunkStream s = f.open(budget, ring)) {
            Evidence.text("plan", s.describe());
            for (int pass = 0; pass < 12; pass++) {
                for (int l = 0; l < 7; l++) {
                    try (LayerBytes b = s.acquire(l)) {
                        if (rnd.nextInt(3) == 0) Thread.sleep(rnd.nextInt(3));
                        f.checkBytes(b);
                    }
                }
            }
            TrunkStats st = s.stats();
            Evidence.text("report", st.report());
            assertEquals(84, st.binds());
            assertEquals(0, st.failedReads());
        }
    }

    static Stream<Arguments> races() {
        return Stream.of(Arguments.of(2, false), Arguments.of(3, false), Arguments.of(8, false), Arguments.of(2, true), Arguments.of(3, true));
    }

    @Test
    @Feature("streaming")
    @DisplayName("truncating trunk.bin after open: the prefetch fails and publishes nothing, hits+misses unchanged, acquire errors")
    void truncatedTrunkFailsThePrefetch() throws IOException {
        PackedTrunk f = fixture(3);
        try (TrunkStream s = f.open(2 * f.slot)) {
            try (RandomAccessFile raf = new RandomAccessFile(f.manifest.bin().toFile(), "rw")) {
                raf.setLength(f.manifest.layer(1).offset() + 100);   // layer 0 intact, layer 1 cut mid-block
            }
            try (LayerBytes b = s.acquire(0)) {
                f.checkBytes(b);
            }
            s.awaitIdle();
            TrunkStats before = s.stats();
            assertEquals(-1, s.slotOf(1), "a failed read never publishes its slot");
            assertTrue(before.failedReads() >= 1, "the prefetch of layer 1 failed");
            TrunkException e = assertThrows(TrunkException.class, () -> s.acquire(1));
            Evidence.text("acquire error", e.getMessage());
            assertTrue(e.getMessage().contains("layer 1") && e.getMessage().contains("short read"), e.getMessage());
            TrunkStats after = s.stats();
            assertEquals(before.hits() + before.misses(), after.hits() + after.misses(), "a failed bind counts nothing");
            assertEquals(1, after.binds());
            assertEquals(-1, s.slotOf(1));
        }
    }

    @Test
    @Feature("streaming")
    @DisplayName("a claim never evicts a slot holding a layer the walk is about to reach (pitfall 16), nor a held slot")
    void claimSparesUpcomingAndHeldLayers() throws IOException {
        PackedTrunk f = fixture(6);
        try (TrunkStream s = f.open(3 * f.slot)) {
            assertEquals(3, s.plan().ring());
            LayerBytes b0 = s.acquire(0);   // held throughout: the reader has the two other slots
            s.awaitIdle();
            int s1 = s.slotOf(1), s2 = s.slotOf(2);
            assertTrue(s1 >= 0 && s2 >= 0, "1 and 2 prefetched while 0 is held");
            // the walk jumps to 4: then 5, 0, 1 are the next three; layer 2 is the only one not about to be reached
            try (LayerBytes b = s.acquire(4)) {
                f.checkBytes(b);
                assertEquals(s2, b.slot(), "layer 4 must take layer 2's slot");
                assertEquals(s1, s.slotOf(1), "layer 1 (reached third after 4) kept its slot");
                assertEquals(b0.slot(), s.slotOf(0), "the held layer 0 kept its slot");
                f.checkBytes(b0);
            }
            b0.close();
        }
        try (TrunkStream s = f.open(2 * f.slot)) {
            LayerBytes b0 = s.acquire(0);
            LayerBytes b1 = s.acquire(1);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> s.acquire(2));
            Evidence.text("all slots held", e.getMessage());
            f.checkBytes(b0);
            f.checkBytes(b1);
            b0.close();
            b1.close();
        }
    }

    @Test
    @Feature("streaming")
    @DisplayName("a released layer's segments throw instead of reading the next layer; a double release is refused")
    void releasedSegmentsAreDead() throws IOException {
        PackedTrunk f = fixture(3);
        try (TrunkStream s = f.open(2 * f.slot)) {
            LayerBytes b = s.acquire(0);
            MemorySegment seg = b.run();
            b.close();
            assertThrows(IllegalStateException.class, () -> seg.get(ValueLayout.JAVA_BYTE, 0));
            assertThrows(IllegalStateException.class, b::close);
        }
    }

    @Test
    @Feature("streaming")
    @DisplayName("pinned layers: the plan pins largest first; a pinned layer is read once (1 miss) and then hit without a slot")
    void pinnedLayersAreReadOnce() throws IOException {
        PackedTrunk f = fixture(5);
        long largest = 0;
        int big = -1;
        for (TrunkManifest.Layer l : f.manifest.layers()) if (l.padded() > largest) { largest = l.padded(); big = l.layer(); }
        try (TrunkStream s = f.open(2 * f.slot + largest, 2)) {
            Evidence.text("plan", s.describe());
            assertTrue(s.plan().isPinned(big), "the largest layer is pinned first");
            for (int pass = 0; pass < 3; pass++) {
                try (LayerBytes b = s.acquire(big)) {
                    assertTrue(b.pinned());
                    assertEquals(-1, b.slot());
                    f.checkBytes(b);
                }
            }
            TrunkStats st = s.stats();
            assertEquals(1, st.misses());
            assertEquals(2, st.pinnedHits());
            assertEquals(-1, s.slotOf(big));
        }
    }

    // ---------------------------------------------------------------------------------------------
    // manifests refused at open

    record Mutation(String name, String expect, Consumer<ObjectNode> edit) {}

    static Stream<Arguments> corruptManifests() {
        List<Mutation> ms = List.of(
                new Mutation("align 8192", "align is 8192, expected 4096", o -> o.put("align", 8192)),
                new Mutation("align missing", "\"align\" is missing", o -> o.remove("align")),
                new Mutation("run offset past EOF", "ends past the end of trunk.bin", o -> layer(o, 2).put("file_off", o.get("file_size").asLong())),
                new Mutation("run length past EOF", "ends past the end of trunk.bin", o -> layer(o, 2).put("nbytes", o.get("file_size").asLong())),
                new Mutation("offset not aligned", "is not a non-negative multiple of 4096", o -> layer(o, 1).put("file_off", layer(o, 1).get("file_off").asLong() + 8)),
                new Mutation("overlapping runs", "overlaps layer 0's run", o -> layer(o, 1).put("file_off", layer(o, 0).get("file_off").asLong())),
                new Mutation("a layer missing", "entry 1 of \"layers\" is layer 2", o -> {
                    ((ArrayNode) o.get("layers")).remove(1);
                    o.put("n_layers", 2);
                }),
                new Mutation("n_layers disagrees", "n_layers is 4 but 3 layers are listed", o -> o.put("n_layers", 4)),
                new Mutation("layer without tensors", "has no \"tensors\" object", o -> layer(o, 1).remove("tensors")),
                new Mutation("empty layer", "nbytes 0 is not positive", o -> layer(o, 1).put("nbytes", 0)),
                new Mutation("tensor past its run", "extends past its run", o -> firstTensor(o, 1).put("off", layer(o, 1).get("nbytes").asLong() - 1)),
                new Mutation("negative geometry", "has negative geometry", o -> firstTensor(o, 1).put("off", -8)),
                new Mutation("unknown dtype", "unknown dtype \"I8R\"", o -> firstTensor(o, 0).put("dtype", "I8R")),
                new Mutation("shape disagrees with bytes", "is not", o -> ((ArrayNode) firstTensor(o, 0).get("shape")).set(0, 17)),
                new Mutation("file_size disagrees", "trunk.bin is", o -> o.put("file_size", o.get("file_size").asLong() + 4096)),
                new Mutation("crc not hex", "crc32c", o -> layer(o, 0).put("crc32c", "xyz")),
                new Mutation("wrong format", "format is", o -> o.put("format", "something-else")),
                new Mutation("number as string", "not an integer", o -> layer(o, 0).put("nbytes", "4096")));
        return ms.stream().map(m -> Arguments.of(m.name(), m));
    }

    private static ObjectNode layer(ObjectNode o, int i) {
        return (ObjectNode) o.get("layers").get(i);
    }

    private static ObjectNode firstTensor(ObjectNode o, int i) {
        return (ObjectNode) layer(o, i).get("tensors").elements().next();
    }

    @Feature("manifest refusals")
    @DisplayName("corrupt trunk.json is refused at open")
    @ParameterizedTest(name = "{0}", quoteTextArguments = false)
    @MethodSource("corruptManifests")
    void corruptManifestIsRefused(String name, Mutation m) throws IOException {
        PackedTrunk f = fixture(3);
        Path json = f.manifest.json();
        ObjectNode o = (ObjectNode) JSON.readTree(json.toFile());
        m.edit().accept(o);
        Files.writeString(json, JSON.writerWithDefaultPrettyPrinter().writeValueAsString(o));
        Evidence.parameter("mutation", name);
        Evidence.parameter("expect", m.expect());
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkManifest.read(f.manifest.dir()));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains(m.expect()), "the refusal must say \"" + m.expect() + "\": " + e.getMessage());
    }

    @Test
    @Feature("manifest refusals")
    @DisplayName("trunk.json that is not JSON is refused at open")
    void badJsonIsRefused() throws IOException {
        PackedTrunk f = fixture(3);
        String text = Files.readString(f.manifest.json());
        Files.writeString(f.manifest.json(), text.substring(0, text.length() / 2));
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkManifest.read(f.manifest.dir()));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("is not valid JSON"), e.getMessage());
    }

    @Test
    @Feature("manifest refusals")
    @DisplayName("a trunk made from other weights is refused: same layout with other bytes, and another layout")
    void trunkFromOtherWeightsIsRefused() {
        PackedTrunk f = fixture(3);
        f.manifest.checkSource(CheckpointIndex.open(f.model));   // its own weights: accepted
        Path sameLayout = tmp.resolve("finetune");
        MarkedCheckpoint.write(sameLayout, 3, 3, 2, Defect.NONE);   // same names, shapes, offsets; other bytes
        TrunkException e1 = assertThrows(TrunkException.class, () -> f.manifest.checkSource(CheckpointIndex.open(sameLayout)));
        Evidence.text("same layout, other bytes", e1.getMessage());
        assertTrue(e1.getMessage().contains("is not the data the trunk was packed from"), e1.getMessage());
        Path otherLayout = tmp.resolve("other");
        MarkedCheckpoint.write(otherLayout, 4, 1, 1, Defect.NONE);
        TrunkException e2 = assertThrows(TrunkException.class, () -> f.manifest.checkSource(CheckpointIndex.open(otherLayout)));
        Evidence.text("other layout", e2.getMessage());
        assertTrue(e2.getMessage().contains("packed from other weights"), e2.getMessage());
    }

    // ---------------------------------------------------------------------------------------------

    private static TrunkManifest pack(Path model, Path out) {
        return TrunkPacker.pack(CheckpointIndex.open(model), out, Progress.silent(), QUIET, null);
    }

    private static void assertNothingOpens(Path out) {
        assertFalse(Files.exists(out.resolve(TrunkManifest.JSON)), "no trunk.json may exist after a failed pack");
        assertThrows(TrunkException.class, () -> TrunkManifest.read(out), "nothing in " + out + " may open as a trunk");
    }

    /** Every tensor's bytes in trunk.bin equal the shard's; runs aligned; padding zero; the manifest reopens against its source. */
    private static void checkPackedAgainstShards(Path model, TrunkManifest m) throws IOException {
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkManifest reread = TrunkManifest.read(m.dir());
        reread.checkSource(index);
        byte[] bin = Files.readAllBytes(m.bin());
        int tensors = 0;
        try (TensorReader r = new TensorReader(); Arena arena = Arena.ofConfined()) {
            for (TrunkManifest.Layer l : reread.layers()) {
                assertEquals(0, l.offset() % 4096, "layer " + l.layer() + " run offset aligned");
                for (TrunkManifest.Tensor t : l.tensors().values()) {
                    MemorySegment shard = r.read(index.tensor(t.name()), arena);
                    MemorySegment trunk = MemorySegment.ofArray(bin).asSlice(l.offset() + t.offset(), t.length());
                    assertEquals(-1, shard.mismatch(trunk), "layer " + l.layer() + " tensor " + t.name() + " differs from the shard");
                    tensors++;
                }
                for (long i = l.offset() + l.nbytes(); i < l.offset() + l.padded(); i++) assertEquals(0, bin[(int) i], "padding at " + i);
            }
        }
        Evidence.parameter("layers", reread.layerCount());
        Evidence.parameter("tensors compared", tensors);
        Evidence.parameter("trunk.bin bytes", bin.length);
    }

    private PackedTrunk fixture(int layers) {
        Path model = tmp.resolve("model");
        MarkedCheckpoint.write(model, layers, 3, 1, Defect.NONE);   // runs of 2-5 pages, none a multiple of 4096
        return new PackedTrunk(model, pack(model, tmp.resolve("trunk")));
    }
}
