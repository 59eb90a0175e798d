package k3j.compare;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.stream.Stream;
import k3j.Repo;
import k3j.dump.Budget;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.io.CheckpointIndex;
import k3j.io.TensorInfo;
import k3j.kernels.Argmax;
import k3j.kernels.Workers;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import org.apache.commons.compress.archivers.tar.TarArchiveEntry;
import org.apache.commons.compress.archivers.tar.TarArchiveOutputStream;
import org.apache.commons.compress.compressors.gzip.GzipCompressorOutputStream;
import org.apache.commons.compress.compressors.xz.XZCompressorOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * k3j.compare on the 93-layer oracle (oracle-fixtures/mini-k3-93 + reference-dumps/mini-k3-93): the dump is
 * found by its shard headers and refused for other weights, archives read like directories, a swapped weight
 * pair in ONE layer is a binding error in that layer only, and the budget bands separate rounding from binding.
 */
class ConformanceTest {
    static final Path MINI = Repo.path("oracle-fixtures/mini-k3-93"), DUMP = Repo.path("reference-dumps/mini-k3-93"),
            DUMPS = Repo.path("reference-dumps");

    @Test
    void theMatchingDumpIsFoundByItsShardHeadersAmongOthers() {
        ReferenceDump d = ReferenceMatch.locate(MINI, null, List.of(DUMPS));
        assertEquals(DUMP.toAbsolutePath().normalize(), d.source().toAbsolutePath().normalize());
        Budget b = d.budget();
        assertEquals(1.2e-7 * Math.sqrt(40) * 50, b.of("attn_out"), 1e-15);
        assertEquals(1.2e-7 * Math.sqrt(40) * 50, b.of("logits"), 1e-15);   // a logit is a dot product over the hidden width 40, not over V = 160
    }

    @Test
    void aDumpMadeForOtherWeightsIsRefusedNamingTheFile() {
        ConformException e = assertThrows(ConformException.class, () -> ReferenceMatch.locate(MINI, DUMPS.resolve("tiny-k3"), List.of()));
        assertEquals(Finding.REFERENCE_MISMATCH, e.finding());
        assertTrue(e.getMessage().startsWith("[reference mismatch]"), e.getMessage());
        assertTrue(e.getMessage().contains("model-00001-of-00002.safetensors"), e.getMessage());
    }

    @Test
    void aShardWithAnotherHeaderIsRefusedByName(@TempDir Path tmp) throws IOException {
        Path copy = copyOf(MINI, tmp.resolve("mini"));
        Path shard = copy.resolve("model-00004-of-00007.safetensors");
        // one byte of the header JSON: same size, another header hash
        try (FileChannel ch = FileChannel.open(shard, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            ByteBuffer b = ByteBuffer.allocate(1);
            ch.read(b, 20);
            b.put(0, (byte) (b.get(0) ^ 0x01)).rewind();
            ch.write(b, 20);
        }
        ConformException e = assertThrows(ConformException.class, () -> ReferenceMatch.locate(copy, DUMP, List.of()));
        assertTrue(e.getMessage().contains("model-00004-of-00007.safetensors: its safetensors header differs"), e.getMessage());
        ConformException none = assertThrows(ConformException.class, () -> ReferenceMatch.locate(copy, null, List.of(DUMPS)));
        assertTrue(none.getMessage().startsWith("[reference mismatch] no reference dump matches"), none.getMessage());
    }

    @Test
    void verifyDataCatchesChangedWeightsThatTheHeaderCheckCannot(@TempDir Path tmp) throws IOException {
        Path copy = copyOf(MINI, tmp.resolve("mini"));
        ReferenceDump d = ReferenceDump.open(DUMP);
        ReferenceMatch.verifyData(d, copy, s -> {});
        swap(copy, 37, "self_attn.q_proj.weight", "self_attn.k_proj.weight");
        ReferenceMatch.check(d, copy); // headers unchanged: the cheap match still holds
        ConformException e = assertThrows(ConformException.class, () -> ReferenceMatch.verifyData(d, copy, s -> {}));
        assertTrue(e.getMessage().contains("sha256 differs"), e.getMessage());
    }

    @Test
    void archivesReadLikeTheDirectory(@TempDir Path tmp) throws IOException {
        ReferenceDump dir = ReferenceDump.open(DUMP);
        for (String name : List.of("mini.tar.gz", "mini.tar.xz")) {
            Path a = tmp.resolve(name);
            tar(DUMP, a, "mini-k3-93/");
            ReferenceDump d = ReferenceDump.open(a);
            assertArrayEquals(dir.ids(), d.ids());
            assertArrayEquals(dir.f32("layers.37.attn_out"), d.f32("layers.37.attn_out"));
            assertArrayEquals(dir.i32("layers.37.moe_idx"), d.i32("layers.37.moe_idx"));
            ReferenceMatch.check(d, MINI);
        }
        Path next = tmp.resolve("models");
        copyOf(MINI, next.resolve("mini"));
        tar(DUMP, next.resolve("mini-reference.tar.gz"), "");
        tar(DUMP, next.resolve("weights-backup.tar.gz"), ""); // not named like a dump: never opened by the search
        assertEquals(next.resolve("mini-reference.tar.gz"), ReferenceMatch.locate(next.resolve("mini"), null, List.of()).source());
    }

    @Test
    void theOracleConformsInEveryLayerAndItsLogits() {
        try (Workers w = Workers.of(2); Conformance c = Conformance.open(MINI, null, List.of(DUMPS), w)) {
            for (int l = 0; l < c.layerCount(); l++) {
                LayerReport r = c.layer(l);
                assertEquals(Finding.CONFORMS, r.finding(), r.line());
                // eight stages, moe_weight on MoE layers, the recurrent and three conv states on KDA layers
                boolean kda = r.kind().startsWith("KDA");
                assertEquals(8 + (l == 0 ? 0 : 1) + (kda ? 4 : 0), r.stages().size(), r.line());
            }
            for (boolean inc : new boolean[] {false, true}) {
                LogitParity.Result p = c.teacherForcing(inc);
                assertEquals(Finding.CONFORMS, p.finding(), p.text());
                assertEquals(p.rows(), p.argmaxEqual(), p.text());
                assertEquals(10, p.top10OverlapMin(), p.text());
            }
            assertTrue(c.greedy().equal());
        }
    }

    @Test
    void aSwappedWeightPairInOneLayerIsABindingErrorInThatLayerOnly(@TempDir Path tmp) throws IOException {
        Path copy = copyOf(MINI, tmp.resolve("mini"));
        swap(copy, 37, "self_attn.q_proj.weight", "self_attn.k_proj.weight");
        swap(copy, 39, "self_attn.kv_a_layernorm.weight", "self_attn.kv_a_layernorm.weight"); // self-swap: a no-op control
        try (Workers w = Workers.of(2); Conformance c = Conformance.open(copy, null, List.of(DUMPS), w)) {
            for (int l = 0; l < c.layerCount(); l++) {
                LayerReport r = c.layer(l);
                if (l == 37) {
                    assertEquals(Finding.BINDING_ERROR, r.finding(), r.line());
                    assertTrue(r.message().startsWith("[binding error] L37 KDA: attn_out"), r.message());
                } else assertEquals(Finding.CONFORMS, r.finding(), r.line());
            }
            LogitParity.Result p = c.teacherForcing(false);
            assertTrue(p.ratioToBudget() > 1, p.text());
        }
    }

    @Test
    void aTensorTheBinderCannotFindIsAMissingTensorNamingIt(@TempDir Path tmp) throws IOException {
        Path copy = copyOf(MINI, tmp.resolve("mini"));
        String name = "language_model.model.layers.37.self_attn.q_proj.weight";
        Path shard = CheckpointIndex.open(copy).tensor(name).file();
        byte[] b = Files.readAllBytes(shard);
        String head = new String(b, 0, 200_000, java.nio.charset.StandardCharsets.ISO_8859_1);
        int at = head.indexOf(name);
        assertTrue(at > 0);
        b[at + name.length() - 1] = 'T'; // ".weighT": same header length, the binder finds no ".weight"
        Files.write(shard, b);
        Path index = copy.resolve("model.safetensors.index.json");
        Files.writeString(index, Files.readString(index).replace(name, name.substring(0, name.length() - 1) + "T"));
        try (Workers w = Workers.of(1); Conformance c = Conformance.open(copy, ReferenceDump.open(DUMP), w)) {
            LayerReport bad = c.layer(37), before = c.layer(36), after = c.layer(38);
            assertEquals(Finding.MISSING_TENSOR, bad.finding());
            assertTrue(bad.message().startsWith("[missing tensor] L37 KDA: missing tensor \"" + name + "\""), bad.message());
            assertEquals(Finding.CONFORMS, before.finding(), "the layers before the first unbindable one still run");
            assertTrue(after.message().startsWith("[missing tensor] L38 KDA not run"), after.message());
            assertThrows(ConformException.class, () -> c.teacherForcing(false));
        }
        // through the matcher, the changed header is refused first
        assertThrows(ConformException.class, () -> ReferenceMatch.check(ReferenceDump.open(DUMP), copy));
    }

    @Test
    void aGivenForwardIsComparedAsIs() {
        try (Workers w = Workers.of(2); k3j.model.Model m = k3j.model.Model.open(MINI)) {
            Conformance c = Conformance.of(m.forward(w), ReferenceDump.open(DUMP));
            assertEquals(Finding.CONFORMS, c.layer(3).finding());
            assertEquals(Finding.CONFORMS, c.teacherForcing(true).finding());
        }
    }

    @Test
    void budgetBandsSeparateRoundingFromBinding() {
        assertEquals(Finding.CONFORMS, Finding.ofRatio(1.0));
        assertEquals(Finding.ROUNDING_DRIFT, Finding.ofRatio(1.01));
        assertEquals(Finding.ROUNDING_DRIFT, Finding.ofRatio(99.9));
        assertEquals(Finding.BINDING_ERROR, Finding.ofRatio(100));
        assertEquals(Finding.BINDING_ERROR, Finding.ofRatio(Double.NaN));
        StageMetric nan = StageMetric.of("attn_out", 4, new float[] {1, Float.NaN}, new float[] {1, 2}, 1e-5);
        assertEquals(Finding.NON_FINITE, nan.finding());
        StageMetric refInf = StageMetric.of("mlp_out", 4, new float[] {1, 2}, new float[] {1, Float.POSITIVE_INFINITY}, 1e-5);
        assertEquals(Finding.NON_FINITE, refInf.finding(), "a non-finite reference must fail too");
        LayerReport nr = Conformance.judge(40, "KDA", List.of(refInf), null, 0);
        assertEquals(Finding.NON_FINITE, nr.finding());
        assertTrue(nr.message().contains("finite ref 1/2, engine 2/2"), nr.message());
        StageMetric m = StageMetric.of("attn_out", 4, new float[] {1, 2.0001f}, new float[] {1, 2}, 1e-5);
        assertEquals(Finding.ROUNDING_DRIFT, m.finding());
        assertEquals(m.maxAbsDiff() / 2 / 1e-5, m.ratioToBudget(), 1e-9);
        LayerReport r = Conformance.judge(5, "KDA", List.of(m), Routing.compare(new int[] {1, 2, 3}, new int[] {1, 3, 2}, 3), 0);
        assertEquals(Finding.BINDING_ERROR, r.finding(), "a routing difference is a binding error whatever the ratios");
        assertTrue(r.message().contains("routing differs on 1/1 tokens (token 0: reference [1, 2, 3], engine [1, 3, 2])"), r.message());
    }

    @Test
    void layerSelections() {
        assertEquals(List.of(0, 1, 2), LayerSelection.parse("", 3));
        assertEquals(List.of(40, 41, 50, 51, 52), LayerSelection.parse("40,41,50-52", 93));
        assertEquals("40-41, 50-52", LayerSelection.format(LayerSelection.parse("50-52,40,41", 93)));
        assertThrows(IllegalArgumentException.class, () -> LayerSelection.parse("0-93", 93));
        assertThrows(IllegalArgumentException.class, () -> LayerSelection.parse("5-3", 93));
        assertThrows(IllegalArgumentException.class, () -> LayerSelection.parse("4,,5", 93));
        assertThrows(IllegalArgumentException.class, () -> LayerSelection.parse("x", 93));
    }

    @Test
    void topKAndArgmaxTakeTheLowerIdOnTies() {
        float[] v = {1, 5, 5, 3, 7, 0};
        assertArrayEquals(new int[] {4, 1, 2, 3, 0}, LogitParity.top(v, 0, 6, 5));
        assertEquals(4, Argmax.reference(v, 0, 6));
        assertEquals(1, Argmax.reference(v, 0, 4));
    }

    @Test
    void theOverviewChartIsSvgWithTheBudgetLine() {
        StageMetric m = StageMetric.of("attn_out", 4, new float[] {1, 3}, new float[] {1, 2}, 1e-5);
        String svg = Charts.overview(List.of(Conformance.judge(0, "KDA dense", List.of(m), null, 0)), "t");
        assertTrue(svg.startsWith("<svg") && svg.contains("budget") && svg.contains("L0 KDA dense attn_out"), svg);
    }

    // ------------------------------------------------------------------ helpers

    static Path copyOf(Path from, Path to) throws IOException {
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(from)) {
            for (Path p : s.toList()) Files.copy(p, to.resolve(p.getFileName()));
        }
        return to;
    }

    /** Swaps the bytes of two same-sized tensors of one layer in place (the header, hence the match, unchanged). */
    static void swap(Path dir, int layer, String a, String b) throws IOException {
        CheckpointIndex idx = CheckpointIndex.open(dir);
        String base = "language_model.model.layers." + layer + ".";
        TensorInfo ta = idx.tensor(base + a), tb = idx.tensor(base + b);
        assertEquals(ta.length(), tb.length(), "swap needs same-sized tensors");
        ByteBuffer ba = ByteBuffer.allocate((int) ta.length()), bb = ByteBuffer.allocate((int) tb.length());
        try (FileChannel ca = FileChannel.open(ta.file(), StandardOpenOption.READ)) {
            ca.read(ba, ta.offset());
        }
        try (FileChannel cb = FileChannel.open(tb.file(), StandardOpenOption.READ)) {
            cb.read(bb, tb.offset());
        }
        try (FileChannel ca = FileChannel.open(ta.file(), StandardOpenOption.WRITE)) {
            ca.write(bb.flip(), ta.offset());
        }
        try (FileChannel cb = FileChannel.open(tb.file(), StandardOpenOption.WRITE)) {
            cb.write(ba.flip(), tb.offset());
        }
    }

    static void tar(Path dir, Path out, String prefix) throws IOException {
        try (OutputStream f = Files.newOutputStream(out);
             OutputStream z = out.toString().endsWith(".xz") ? new XZCompressorOutputStream(f) : new GzipCompressorOutputStream(f);
             TarArchiveOutputStream t = new TarArchiveOutputStream(z)) {
            t.setLongFileMode(TarArchiveOutputStream.LONGFILE_POSIX);
            try (Stream<Path> s = Files.list(dir)) {
                for (Path p : s.sorted().toList()) {
                    TarArchiveEntry e = new TarArchiveEntry(p.toFile(), prefix + p.getFileName());
                    t.putArchiveEntry(e);
                    Files.copy(p, t);
                    t.closeArchiveEntry();
                }
            }
        }
    }
}
