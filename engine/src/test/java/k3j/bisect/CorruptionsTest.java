package k3j.bisect;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import k3j.Repo;
import k3j.cli.K3;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.model.Binder;
import k3j.model.Model;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * The corruption writer changes exactly the bytes it names and nothing else (headers included, untouched
 * shards shared by hard links), refuses what would not bind, and the candidate table holds what bisect
 * promises (same shape AND dtype only; experts only when selected).
 */
class CorruptionsTest {
    @TempDir
    Path tmp;

    static Path mini() {
        return Repo.path("oracle-fixtures/mini-k3-93");
    }

    static byte[] bytes(TensorInfo t) throws IOException {
        byte[] all = Files.readAllBytes(t.file());
        return Arrays.copyOfRange(all, (int) t.offset(), (int) (t.offset() + t.length()));
    }

    static long headerBytes(Path shard) throws IOException {
        byte[] b = Files.readAllBytes(shard);
        return 8 + ByteBuffer.wrap(b, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    /** A sparse source: data, a hole of several blocks, data straddling a block edge, a trailing hole. */
    @Test
    void aCopyHasTheSourcesBytesAndKeepsItsHoles() throws IOException {
        Path src = tmp.resolve("sparse.bin"), dst = tmp.resolve("copy.bin");
        int block = Corruptions.SPARSE_BLOCK;
        long size = 9L * block + 123;
        try (var ch = java.nio.channels.FileChannel.open(src, java.nio.file.StandardOpenOption.CREATE_NEW, java.nio.file.StandardOpenOption.WRITE)) {
            byte[] head = new byte[block / 2 + 7];
            new java.util.Random(5).nextBytes(head);
            ch.write(ByteBuffer.wrap(head), 0);
            ch.write(ByteBuffer.wrap(new byte[] {1, 2, 3}), 5L * block - 1);
            ch.write(ByteBuffer.wrap(new byte[] {0}), size - 1);
        }
        Corruptions.copySparse(src, dst);
        assertEquals(Files.size(src), Files.size(dst));
        assertEquals(-1, Files.mismatch(src, dst), "the copy's bytes equal the source's");
        Long blocks = allocated(dst);
        if (blocks != null) assertTrue(blocks <= 3L * block + 65536,   // the three data blocks and the page of the trailing length byte
                "only the blocks holding data are written: " + blocks + " bytes allocated of " + size);
        assertThrows(java.nio.file.FileAlreadyExistsException.class, () -> Corruptions.copySparse(src, dst), "never over an existing file");
    }

    /** Bytes on disk (du), or null where the platform does not say. */
    static Long allocated(Path p) {
        try {
            Process pr = new ProcessBuilder("du", "-B1", p.toString()).redirectErrorStream(true).start();
            String out = new String(pr.getInputStream().readAllBytes()).trim();
            return pr.waitFor() == 0 ? Long.parseLong(out.split("\\s+")[0]) : null;
        } catch (IOException | InterruptedException | NumberFormatException e) {
            return null;
        }
    }

    @Test
    void nibbleFlipExchangesTheTwoElementsOfAByte() {
        assertEquals((byte) 0x21, Corruptions.flipNibbles((byte) 0x12));
        assertEquals((byte) 0x0F, Corruptions.flipNibbles((byte) 0xF0));
        for (int b = 0; b < 256; b++) assertEquals((byte) b, Corruptions.flipNibbles(Corruptions.flipNibbles((byte) b)));
    }

    @Test
    void specsRoundTripAndBadOnesNameTheForms() {
        for (Corruption c : List.of(new Corruption.Swap(37, "self_attn.q_proj.weight", "self_attn.k_proj.weight"), new Corruption.NibbleFlip(38, 6),
                new Corruption.Fill(13, "self_attn.A_log", 5, 3.0f), new Corruption.Scale(60, "post_attention_layernorm.weight", 1.5f),
                new Corruption.Transpose(5, "self_attn.o_proj.weight"))) {
            assertEquals(c, Corruptions.parse(c.spec()), c.spec());
        }
        BisectException e = assertThrows(BisectException.class, () -> Corruptions.parse("swap:x:a,b"));
        assertTrue(e.getMessage().contains("swap:L:A,B"), e.getMessage());
        assertThrows(BisectException.class, () -> Corruptions.parse("melt:3:a"));
    }

    @Test
    void aSwapExchangesExactlyTwoTensorsAndKeepsEveryHeader() throws IOException {
        Path src = mini(), dst = tmp.resolve("swapped");
        Corruptions.write(src, dst, List.of(new Corruption.Swap(37, "self_attn.q_proj.weight", "self_attn.k_proj.weight")));
        CheckpointIndex a = CheckpointIndex.open(src), b = CheckpointIndex.open(dst);
        String q = Binder.LAYERS + "37.self_attn.q_proj.weight", k = Binder.LAYERS + "37.self_attn.k_proj.weight";
        assertArrayEquals(bytes(a.tensor(q)), bytes(b.tensor(k)));
        assertArrayEquals(bytes(a.tensor(k)), bytes(b.tensor(q)));
        assertFalse(Arrays.equals(bytes(a.tensor(q)), bytes(a.tensor(k))), "the fixture's q_proj and k_proj must differ, else the swap proves nothing");
        int changed = 0;
        for (TensorInfo t : a.tensors()) {
            TensorInfo u = b.tensor(t.name());
            assertEquals(t.offset(), u.offset(), t.name());
            if (!Arrays.equals(bytes(t), bytes(u))) changed++;
        }
        assertEquals(2, changed, "tensors whose bytes differ");
        try (var files = Files.list(src)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".safetensors")).toList()) {
                Path g = dst.resolve(f.getFileName());
                long hb = headerBytes(f);
                assertArrayEquals(Arrays.copyOf(Files.readAllBytes(f), (int) hb), Arrays.copyOf(Files.readAllBytes(g), (int) hb), "header of " + g);
                boolean touched = f.getFileName().equals(a.tensor(q).file().getFileName());
                assertEquals(!touched, Files.isSameFile(f, g) || Arrays.equals(Files.readAllBytes(f), Files.readAllBytes(g)), "untouched shards are shared: " + g);
            }
        }
    }

    @Test
    void aSwapOfDifferentShapesOrDtypesIsRefusedNamingBoth() {
        BisectException e = assertThrows(BisectException.class,
                () -> Corruptions.write(mini(), tmp.resolve("x"), List.of(new Corruption.Swap(1, "self_attn.q_proj.weight", "self_attn.o_proj.weight"))));
        assertTrue(e.getMessage().contains("q_proj") && e.getMessage().contains("o_proj") && e.getMessage().contains("same shape and dtype"), e.getMessage());
        e = assertThrows(BisectException.class, () -> Corruptions.write(mini(), tmp.resolve("y"), List.of(new Corruption.NibbleFlip(0, 1))));
        assertTrue(e.getMessage().contains("layers.0.block_sparse_moe.experts.1"), "a dense layer has no experts: " + e.getMessage());
    }

    @Test
    void aCorruptionThatChangesNoByteIsRefusedAndWritesNothing() {
        // x 1.001 moves a bf16 value by less than half its spacing (2^-9 relative at least), so every element rounds back
        k3j.cli.CliRun r = k3j.cli.CliRun.k3("corrupt", mini().toString(), tmp.resolve("same").toString(),
                "--corruption", "scale:1:self_attn.q_proj.weight:1.001");
        assertTrue(r.exit() != 0, r.out());
        assertTrue(r.err().contains("changes no byte") && r.err().contains("layers.1.self_attn.q_proj.weight"), r.err());
        assertFalse(r.out().contains("wrote"), r.out());
        assertFalse(Files.exists(tmp.resolve("same")), "nothing is written");
        BisectException e = assertThrows(BisectException.class, () -> Corruptions.write(mini(), tmp.resolve("fill"),
                List.of(new Corruption.Fill(13, "self_attn.A_log", 20, 1.0f))));
        assertTrue(e.getMessage().contains("outside"), e.getMessage());
        e = assertThrows(BisectException.class, () -> Corruptions.write(mini(), tmp.resolve("zeros"),
                List.of(new Corruption.Fill(13, "self_attn.A_log", 5, 0.0f))));
        assertTrue(e.getMessage().contains("changes no byte"), "the zero padding filled with zeros: " + e.getMessage());
    }

    @Test
    void aTransposeAndAFillRewriteOnlyValues() throws IOException {
        Path dst = tmp.resolve("t");
        Corruptions.write(mini(), dst, List.of(new Corruption.Transpose(5, "self_attn.o_proj.weight"), new Corruption.Fill(13, "self_attn.A_log", 5, 3.0f)));
        CheckpointIndex a = CheckpointIndex.open(mini()), b = CheckpointIndex.open(dst);
        String o = Binder.LAYERS + "5.self_attn.o_proj.weight";
        ByteBuffer x = ByteBuffer.wrap(bytes(a.tensor(o))).order(ByteOrder.LITTLE_ENDIAN), y = ByteBuffer.wrap(bytes(b.tensor(o))).order(ByteOrder.LITTLE_ENDIAN);
        int r = 40, c = 50;
        for (int i = 0; i < r; i++) for (int j = 0; j < c; j++) assertEquals(x.getShort(2 * (i * c + j)), y.getShort(2 * (j * r + i)));
        ByteBuffer al = ByteBuffer.wrap(bytes(b.tensor(Binder.LAYERS + "13.self_attn.A_log"))).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer al0 = ByteBuffer.wrap(bytes(a.tensor(Binder.LAYERS + "13.self_attn.A_log"))).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 10; i++) assertEquals(i < 5 ? al0.getFloat(4 * i) : 3.0f, al.getFloat(4 * i), "A_log[" + i + "]");
    }

    @Test
    void theCandidateTableSwapsOnlySameShapeAndDtypeAndFlipsOnlySelectedExperts() {
        try (Model m = Model.open(mini())) {
            List<Candidate> c = Candidates.of(m.binding().layers().get(37), new int[] {0, 1, 6, 0, 1, 6}, 7);
            assertTrue(c.contains(new Candidate.Swap("self_attn.k_proj.weight", "self_attn.q_proj.weight")));
            assertFalse(c.stream().anyMatch(x -> x instanceof Candidate.Swap s && (s.a().contains("A_log") || s.b().contains("A_log"))),
                    "A_log (F32 [10]) has no same-shape, same-dtype partner (o_norm is BF16 [10])");
            assertFalse(c.stream().anyMatch(x -> x instanceof Candidate.Transpose t && t.tensor().contains("res_proj")), "[1, E] is a vector, not a matrix to transpose");
            assertTrue(c.contains(new Candidate.NibbleFlip(6, List.of(k3j.cache.ExpertPart.W1_PACKED, k3j.cache.ExpertPart.W2_PACKED, k3j.cache.ExpertPart.W3_PACKED))));
            assertFalse(c.stream().anyMatch(x -> x instanceof Candidate.NibbleFlip n && n.expert() == 3), "expert 3 is not selected");
            assertTrue(c.contains(new Candidate.ExpertSwap(3, 6)));
            assertFalse(c.contains(new Candidate.ExpertSwap(2, 3)), "neither 2 nor 3 is selected");
            assertTrue(Candidates.of(m.binding().layers().get(0), null, 7).stream().noneMatch(x -> x.touches().getFirst().startsWith("block_sparse_moe.")));
        }
    }

    @Test
    void theCorruptCommandWritesAndRefusesBadSpecsWithUsage() {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = K3.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        assertEquals(0, cl.execute("corrupt", mini().toString(), tmp.resolve("c").toString(), "--corruption", "nibbles:38:6"), err.toString());
        assertTrue(out.toString().contains("nibbles:38:6"));
        assertEquals(2, cl.execute("corrupt", mini().toString(), tmp.resolve("d").toString(), "--corruption", "nibbles:38"), "a malformed spec is usage");
        assertEquals(2, cl.execute("corrupt", mini().toString(), tmp.resolve("c").toString(), "--corruption", "nibbles:38:6"), "OUT exists and is not empty");
    }
}
