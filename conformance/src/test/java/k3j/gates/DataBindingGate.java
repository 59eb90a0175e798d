package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Epic;
import io.qameta.allure.Feature;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.util.Comparator;
import java.util.List;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.harness.Caught;
import k3j.harness.Child;
import k3j.harness.Evidence;
import k3j.harness.PackedTrunk;
import k3j.harness.Project;
import k3j.harness.Tamper;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.kernels.Workers;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.model.Model;
import k3j.state.Binding;
import k3j.state.StateException;
import k3j.state.StateFile;
import k3j.trunk.DataBinding;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A packed trunk and a saved state bind to the checkpoint's data, not to its headers: a trunk stands in for no other
 * weights, even ones with the same headers and a change in the middle of a layer, and is refused before any token
 * or verdict naming the layer and the tensor; a state saved on other data, a state with one flipped bit or a NaN is
 * refused. Data: copies of the 93-layer and the tiny oracle, altered by {@link Corruptions} (headers unchanged).
 */
@Tag("faults")
@Epic("faults")
class DataBindingGate {
    static final String Q = "self_attn.q_proj.weight", K = "self_attn.k_proj.weight";
    static final String EDITED_BIN = "a byte of trunk.bin changed in L40, its CRC-32C and sha256 in trunk.json recomputed";

    @TempDir
    Path tmp;

    @Test
    @Feature("trunk binding")
    @DisplayName("a trunk of mini-k3-93 against a copy with L5 q_proj/k_proj swapped: pack-trunk does not reuse it, conform and run refuse it naming L5")
    void aStaleTrunkStandsInForNoOtherWeights() throws IOException {
        Path mini = Project.fixture("mini-k3-93");
        Path trunk = pack(mini);
        Path copy = tmp.resolve("swapped");
        Corruptions.write(mini, copy, List.of(new Corruption.Swap(5, Q, K)));

        for (DataBinding.Check check : DataBinding.Check.values()) {
            TrunkException e = assertThrows(TrunkException.class, () -> TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(copy), check), check.flag());
            assertEquals(5, e.layer(), e.getMessage());
            assertTrue(e.getMessage().contains("layers.5." + Q) || e.getMessage().contains("layers.5." + K), e.getMessage());
        }
        try (Child c = Child.k3("conform", copy.toString(), "--reference", Project.dump("mini-k3-93").toString(), "--trunk", trunk.toString(),
                "--cache-gb", "0.001", "--no-logits")) {
            int rc = c.exitCode();
            Evidence.text("conform COPY --trunk T", c.transcript());
            assertNotEquals(0, rc, c.transcript());
            assertTrue(c.transcript().contains("layer 5") && c.transcript().contains("is not the data the trunk was packed from"), c.transcript());
            assertTrue(c.out().stream().noneMatch(l -> l.startsWith("L0") || l.startsWith("VERDICT")), "no verdict before the refusal:\n" + c.transcript());
        }
        try (Child c = Child.k3(copy.toString(), "--ids", "1,2,3", "--gen", "2", "--trunk", trunk.toString(), "--cache-gb", "0.01",
                "--out", tmp.resolve("run.json").toString())) {
            int rc = c.exitCode();
            Evidence.text("run COPY --trunk T", c.transcript());
            assertNotEquals(0, rc, c.transcript());
            assertTrue(c.transcript().contains("layer 5"), c.transcript());
            assertTrue(c.out().stream().noneMatch(l -> l.startsWith("generated ids")), c.transcript());
        }
        try (Child c = Child.k3("pack-trunk", copy.toString(), trunk.toString(), "--gather")) {
            int rc = c.exitCode();
            Evidence.text("pack-trunk COPY T", c.transcript());
            assertEquals(0, rc, c.transcript());
            assertTrue(!c.transcript().contains("already holds") && c.transcript().contains("repacking"), c.transcript());
        }
        DataBinding.Result r = TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(copy), DataBinding.Check.FULL);   // repacked from the copy
        assertTrue(r.tensorsHashed() > 0, r.line());
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("one byte flipped in place in the middle of L40's largest tensor, its mtime set back: the fast check refuses it naming L40 and the tensor")
    void aFlippedByteInPlaceIsRefusedByTheFastCheck() throws IOException {
        Path model = Tamper.copy(Project.fixture("mini-k3-93"), tmp.resolve("model"));
        Path trunk = pack(model);
        DataBinding.Result clean = TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(model));
        Evidence.text("clean", clean.line());
        assertEquals(0, clean.tensorsHashed(), "the same unchanged files: nothing to re-hash: " + clean.line());
        assertTrue(clean.line().startsWith("trunk binding: fast check, all 7 shard(s)"), clean.line());
        DataBinding.Result full = TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(model), DataBinding.Check.FULL);
        assertEquals(TrunkManifest.read(trunk).layers().stream().mapToInt(l -> l.tensors().size()).sum(), full.tensorsHashed(), full.line());

        CheckpointIndex index = CheckpointIndex.open(model);
        TensorInfo t = largestTrunkTensor(index, 40);
        FileTime mtime = Files.getLastModifiedTime(t.file());
        Tamper.flipByte(t.file(), t.offset() + t.length() / 2, 0x01);
        Files.setLastModifiedTime(t.file(), mtime);   // the change time still moves: no user can set it back
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(model)));
        Evidence.text("refusal", e.getMessage());
        assertEquals(40, e.layer(), e.getMessage());
        assertTrue(e.getMessage().contains(t.name()), e.getMessage());
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("the startup lines and the run report say which binding check ran: fast by default, full with --verify-trunk=full")
    void theReportSaysWhichCheckRan() throws IOException {
        Path mini = Project.fixture("mini-k3-93");
        Path trunk = pack(mini);
        for (String check : new String[] {"fast", "full"}) {
            Path out = tmp.resolve(check + ".json");
            try (Child c = Child.k3(mini.toString(), "--ids", "1,2", "--gen", "1", "--trunk", trunk.toString(), "--cache-gb", "0.01",
                    "--verify-trunk", check, "--out", out.toString())) {
                int rc = c.exitCode();
                Evidence.text("run --verify-trunk " + check, c.transcript());
                assertEquals(0, rc, c.transcript());
                assertTrue(c.transcript().contains("trunk binding: " + check + " check"), c.transcript());
            }
            assertEquals(check, Project.json(out).path("trunk_binding").path("check").asText(), Files.readString(out));
        }
    }

    @Test
    @Feature("state binding")
    @DisplayName("a state saved on a copy with other data (the same headers) is refused by the original; its own state loads")
    void aForeignStateIsRefused() throws Exception {
        Path other = tmp.resolve("other");
        Corruptions.write(tiny(), other, List.of(new Corruption.Scale(1, Q, 2f)));
        CheckpointIndex theirs = CheckpointIndex.open(other);
        Path foreign = tmp.resolve("foreign.k3state");
        save(theirs, foreign, Binding.of(config(), config().layerCount(), theirs));
        StateFile.load(ownState(), original(), emptyState());
        StateException e = assertThrows(StateException.class, () -> StateFile.load(foreign, original(), emptyState()));
        Evidence.text("foreign", e.getMessage());
        assertTrue(e.getMessage().contains("headers match, but their data does not"), e.getMessage());
    }

    @Test
    @Feature("state binding")
    @DisplayName("one flipped bit in a state's payload is refused by its checksum")
    void aFlippedStateBitIsRefused() throws Exception {
        Path flipped = Files.copy(ownState(), tmp.resolve("flipped.k3state"));
        byte[] b = Files.readAllBytes(flipped);
        b[b.length - 40] ^= 0x10;   // one bit of the last layer's payload
        Files.write(flipped, b);
        StateException e = assertThrows(StateException.class, () -> StateFile.load(flipped, original(), emptyState()));
        Evidence.text("flipped", e.getMessage());
        assertTrue(e.getMessage().contains("checksum does not match"), e.getMessage());
    }

    @Test
    @Feature("state binding")
    @DisplayName("a NaN in a state's payload (checksum kept consistent) is refused")
    void aNonFiniteStateIsRefused() throws Exception {
        Path nan = Files.copy(ownState(), tmp.resolve("nan.k3state"));
        byte[] b = Files.readAllBytes(nan);
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putFloat(b.length - 36, Float.NaN);
        byte[] sum = MessageDigest.getInstance("SHA-256").digest(java.util.Arrays.copyOf(b, b.length - 32));
        System.arraycopy(sum, 0, b, b.length - 32, 32);   // only the finite check can catch it
        Files.write(nan, b);
        StateException e = assertThrows(StateException.class, () -> StateFile.load(nan, original(), emptyState()));
        Evidence.text("NaN", e.getMessage());
        assertTrue(e.getMessage().contains("holds NaN"), e.getMessage());
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("trunk.bin edited in L40 with its CRC-32C and sha256 in trunk.json recomputed: conform and bisect --trunk refuse it naming L40,"
            + " run --no-trunk-crc --verify-trunk full refuses it, and run's fast check says it did not compare trunk.bin with the shards")
    void aTrunkEditedWithItsManifestRecomputedIsCaught() throws Exception {
        Path mini = Project.fixture("mini-k3-93");
        Path trunk = pack(mini);
        TensorInfo t = largestTrunkTensor(CheckpointIndex.open(mini), 40);
        TrunkManifest.Layer layer = TrunkManifest.read(trunk).layer(40);
        long at = layer.offset() + layer.tensors().get(t.name()).offset() + t.length() / 2;
        Tamper.flipByte(trunk.resolve(TrunkManifest.BIN), at, 0x01);
        byte[] bin = new byte[(int) layer.nbytes()];
        try (FileChannel ch = FileChannel.open(trunk.resolve(TrunkManifest.BIN), StandardOpenOption.READ)) {
            ch.read(ByteBuffer.wrap(bin), layer.offset());
        }
        TrunkManifest.Tensor meta = layer.tensors().get(t.name());
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(bin);
        String sha = Tamper.sha256(java.util.Arrays.copyOfRange(bin, (int) meta.offset(), (int) (meta.offset() + meta.length())));
        editTrunkJson(trunk, root -> {
            ObjectNode l = (ObjectNode) root.path("layers").get(40);
            l.put("crc32c", java.util.HexFormat.of().toHexDigits((int) crc.getValue()));
            ((ObjectNode) l.path("tensors").path(t.name())).put("sha256", sha);
        });
        assertEquals(0, TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(mini)).tensorsHashed(), "the fast check reads no data");

        refusedNaming(40, EDITED_BIN, "conform --trunk", "conform", mini.toString(), "--reference", Project.dump("mini-k3-93").toString(),
                "--trunk", trunk.toString(), "--cache-gb", "0.001", "--no-logits", "--layers", "38-41");
        refusedNaming(40, EDITED_BIN, "bisect --trunk", "bisect", mini.toString(), "--reference", Project.dump("mini-k3-93").toString(),
                "--trunk", trunk.toString(), "--cache-gb", "0.001", "--layers", "40");
        refusedNaming(40, EDITED_BIN, "run --no-trunk-crc --verify-trunk full", mini.toString(), "--ids", "1,2", "--gen", "1", "--trunk", trunk.toString(),
                "--cache-gb", "0.01", "--no-trunk-crc", "--verify-trunk", "full", "--out", tmp.resolve("full.json").toString());
        try (Child c = Child.k3(mini.toString(), "--ids", "1,2", "--gen", "1", "--trunk", trunk.toString(), "--cache-gb", "0.01", "--no-trunk-crc",
                "--out", tmp.resolve("fast.json").toString())) {
            c.exitCode();
            Evidence.text("run --no-trunk-crc, fast check (edited trunk.bin)", c.transcript());
            assertTrue(c.transcript().contains("trunk binding: fast check") && c.transcript().contains("trunk.bin not compared with the shards"), c.transcript());
        }
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("L5 q_proj/k_proj swapped in the shard after the pack, trunk.json's shard identities set to the changed shard's:"
            + " conform --trunk refuses L5 where conform without it fails L5; never CONFORMS")
    void aTrunkRebadgedToAChangedShardIsCaught() throws Exception {
        Path model = Tamper.copy(Project.fixture("mini-k3-93"), tmp.resolve("model"));
        Path trunk = pack(model);
        CheckpointIndex index = CheckpointIndex.open(model);
        TensorInfo q = index.find("language_model.model.layers.5." + Q).or(() -> index.find("model.layers.5." + Q)).orElseThrow();
        TensorInfo k = index.find(q.name().replace(Q, K)).orElseThrow();
        try (FileChannel ch = FileChannel.open(q.file(), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer qb = ByteBuffer.allocate((int) q.length()), kb = ByteBuffer.allocate((int) k.length());
            ch.read(qb, q.offset());
            ch.read(kb, k.offset());
            ch.write(qb.flip(), k.offset());
            ch.write(kb.flip(), q.offset());
        }
        java.util.Map<String, DataBinding.FileIdentity> now = DataBinding.identitiesOf(CheckpointIndex.open(model));
        editTrunkJson(trunk, root -> {
            for (var sh : root.path("source").path("shards")) {
                DataBinding.FileIdentity id = now.get(sh.path("name").asText());
                ((ObjectNode) sh.path("identity")).put("dev", id.device()).put("ino", id.inode()).put("mtime_ns", id.mtimeNanos()).put("ctime_ns", id.ctimeNanos());
            }
        });
        String ref = Project.dump("mini-k3-93").toString();
        try (Child c = Child.k3("conform", model.toString(), "--reference", ref, "--no-logits", "--layers", "4-6")) {
            int rc = c.exitCode();
            Evidence.text("conform COPY", c.transcript());
            assertNotEquals(0, rc, c.transcript());
            assertTrue(c.out().stream().anyMatch(l -> l.startsWith("L5") && l.contains("FAIL")), c.transcript());
        }
        refusedNaming(5, "L5 q_proj/k_proj swapped in the shard after the pack, trunk.json's shard identities rebadged", "conform --trunk", "conform", model.toString(), "--reference", ref, "--trunk", trunk.toString(),
                "--cache-gb", "0.001", "--no-logits", "--layers", "4-6");
    }

    @Test
    @Feature("trunk binding")
    @DisplayName("two tensors' sha256 swapped in trunk.json (L7): conform --trunk and --verify-trunk full refuse it naming L7 and trunk.json's digest")
    void swappedDigestsInTrunkJsonAreCaught() throws Exception {
        Path mini = Project.fixture("mini-k3-93");
        Path trunk = pack(mini);
        editTrunkJson(trunk, root -> {
            ObjectNode ts = (ObjectNode) root.path("layers").get(7).path("tensors");
            var names = ts.fieldNames();
            ObjectNode a = (ObjectNode) ts.get(names.next()), b = (ObjectNode) ts.get(names.next());
            String sa = a.path("sha256").asText();
            a.put("sha256", b.path("sha256").asText());
            b.put("sha256", sa);
        });
        TrunkException e = assertThrows(TrunkException.class, () -> TrunkManifest.read(trunk).checkSource(CheckpointIndex.open(mini), DataBinding.Check.FULL));
        Evidence.text("full check", e.getMessage());
        assertEquals(7, e.layer(), e.getMessage());
        assertTrue(e.getMessage().contains("trunk.json records another data digest"), e.getMessage());
        refusedNaming(7, "two tensors' sha256 swapped in trunk.json (L7)", "conform --trunk", "conform", mini.toString(), "--reference", Project.dump("mini-k3-93").toString(),
                "--trunk", trunk.toString(), "--cache-gb", "0.001", "--no-logits", "--layers", "6-8");
    }

    @Test
    @Feature("state binding")
    @DisplayName("a routed-expert byte changed in place after --save-state: --load-state refuses the state, saying the experts are bound by the shards' identity")
    void anExpertChangedInPlaceAfterTheSaveIsRefused() throws Exception {
        Path model = Tamper.copy(tiny(), tmp.resolve("tiny"));
        CheckpointIndex index = CheckpointIndex.open(model);
        Path state = tmp.resolve("expert.k3state");
        save(index, state, Binding.of(config(), config().layerCount(), index));
        StateFile.load(state, Binding.of(config(), config().layerCount(), CheckpointIndex.open(model)), emptyState());   // the same files: loads
        TensorInfo expert = index.tensors().stream().filter(x -> x.name().contains(".experts.")).max(Comparator.comparingLong(TensorInfo::length)).orElseThrow();
        Tamper.flipByte(expert.file(), expert.offset() + expert.length() / 2, 0x11);
        StateException e = assertThrows(StateException.class,
                () -> StateFile.load(state, Binding.of(config(), config().layerCount(), CheckpointIndex.open(model)), emptyState()));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains("binds the routed experts by the shards' file identity"), e.getMessage());
    }

    /**
     * Runs k3 with {@code args}; it must exit non-zero naming layer {@code layer}: a refusal before any verdict or
     * token, or that layer failed (conform's FAIL line), never VERDICT: CONFORMS nor generated ids. With {@code planted},
     * the report's catches table gets its row (kind "edited trunk") before the assertions.
     */
    private static void refusedNaming(int layer, String planted, String what, String... args) {
        try (Child c = Child.k3(args)) {
            int rc = c.exitCode();
            Evidence.text(what, c.transcript());
            boolean named = c.transcript().contains("layer " + layer);
            boolean green = c.out().stream().anyMatch(l -> l.startsWith("VERDICT: CONFORMS") || l.startsWith("generated ids")
                    || (l.startsWith("L" + layer + " ") && l.contains(" PASS ")));
            if (planted != null) {
                boolean caught = rc != 0 && named && !green;
                String category = c.transcript().contains("[binding error] L" + layer) ? "binding error" : "refused";
                (caught ? new Caught("edited trunk", planted + " (" + what + ")", layer, "trunk witness", category, null) : Caught.missed("edited trunk", planted + " (" + what + ")")).attach();
            }
            assertNotEquals(0, rc, c.transcript());
            assertTrue(named, c.transcript());
            assertTrue(!green, "no green verdict, no ids, L" + layer + " not passed:\n" + c.transcript());
        }
    }

    private static TensorInfo largestTrunkTensor(CheckpointIndex index, int layer) {
        return index.tensors().stream().filter(x -> x.name().contains(".layers." + layer + ".") && !x.name().contains(".experts."))
                .max(Comparator.comparingLong(TensorInfo::length)).orElseThrow();
    }

    private static void editTrunkJson(Path trunk, java.util.function.Consumer<ObjectNode> edit) throws IOException {
        Path json = trunk.resolve(TrunkManifest.JSON);
        ObjectMapper mapper = new ObjectMapper();
        ObjectNode root = (ObjectNode) mapper.readTree(json.toFile());
        edit.accept(root);
        Files.write(json, mapper.writerWithDefaultPrettyPrinter().writeValueAsBytes(root));
    }

    private static Path tiny() {
        return Project.fixture("tiny-k3");
    }

    private static ModelConfig config() {
        return ConfigReader.read(tiny().resolve("config.json"));
    }

    private static Binding original() {
        return Binding.of(config(), config().layerCount(), CheckpointIndex.open(tiny()));
    }

    /** A state of the tiny oracle after four ids. */
    private Path ownState() {
        Path own = tmp.resolve("own.k3state");
        if (!Files.exists(own)) save(CheckpointIndex.open(tiny()), own, original());
        return own;
    }

    private static void save(CheckpointIndex index, Path file, Binding binding) {
        int[] ids = {1, 2, 3, 4};
        try (Workers w = Workers.of(1); Model m = Model.open(index, config(), -1)) {
            Forward f = m.forward(w);
            DecodeState st = f.newState(16);
            f.step(ids, st, false, null);
            StateFile.save(file, binding, new byte[32], ids, st);
        }
    }

    /** A fresh decode state of the tiny oracle for a state file to load into. */
    private static DecodeState emptyState() {
        return DecodeState.create(config(), config().layerCount(), 16);
    }

    private Path pack(Path model) {
        return PackedTrunk.pack(model, tmp);
    }
}
