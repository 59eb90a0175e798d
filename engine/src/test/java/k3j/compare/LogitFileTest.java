package k3j.compare;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import k3j.cli.CliRun;
import k3j.dump.LogitFile;
import k3j.dump.ReferenceDump;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Logit files for {@code k3 compare-logits}: raw --dump-logits vectors, .npy versions 1.0, 2.0 and 3.0 of one row or
 * all rows, and the refusals (wrong length, another dtype, Fortran order, a NaN, an infinity); the command
 * passes the reference's own row and fails a row with one logit moved.
 */
class LogitFileTest {
    static final Path MINI_DUMP = ConformanceTest.DUMPS.resolve("mini-k3-93");

    @Test
    void rawAndNpyOfBothVersionsReadTheSameFloats(@TempDir Path tmp) throws IOException {
        float[] v = {1.5f, -2f, 0.25f, 7f};
        Path raw = Files.write(tmp.resolve("l.bin"), le(v));
        assertArrayEquals(v, LogitFile.read(raw, 4).values());
        Path n1 = Files.write(tmp.resolve("l1.npy"), npy(1, "<f4", false, "(4,)", v));
        Path n2 = Files.write(tmp.resolve("l2.npy"), npy(2, "<f4", false, "(2, 2)", v));
        assertArrayEquals(v, LogitFile.read(n1, 4).values());
        LogitFile two = LogitFile.read(n2, 2);
        assertEquals(2, two.rows());
        assertArrayEquals(new float[] {0.25f, 7f}, two.row(1));
    }

    @Test
    void wrongLengthsDtypesLayoutsAndNonFiniteValuesAreRefused(@TempDir Path tmp) throws IOException {
        float[] v = {1, 2, 3, 4};
        refused(Files.write(tmp.resolve("short.bin"), le(Arrays.copyOf(v, 3))), 4, "holds exactly V = 4 float32");
        refused(Files.write(tmp.resolve("long.bin"), le(Arrays.copyOf(v, 8))), 4, "holds exactly V = 4 float32");
        refused(Files.write(tmp.resolve("nan.bin"), le(new float[] {1, Float.NaN, 3, 4})), 4, "logit 1 is NaN");
        refused(Files.write(tmp.resolve("inf.npy"), npy(1, "<f4", false, "(4,)", new float[] {1, 2, Float.NEGATIVE_INFINITY, 4})), 4, "logit 2 is -Infinity");
        refused(Files.write(tmp.resolve("f8.npy"), npy(1, "<f8", false, "(2,)", v)), 4, "only little-endian float32");
        refused(Files.write(tmp.resolve("be.npy"), npy(1, ">f4", false, "(4,)", v)), 4, "only little-endian float32");
        refused(Files.write(tmp.resolve("fortran.npy"), npy(1, "<f4", true, "(2, 2)", v)), 2, "Fortran order");
        refused(Files.write(tmp.resolve("v4.npy"), npy(4, "<f4", false, "(4,)", v)), 4, "format version 4.0 (numpy reads 1.0, 2.0 and 3.0 only)");
        assertEquals(4, LogitFile.read(Files.write(tmp.resolve("v3.npy"), npy(3, "<f4", false, "(4,)", v)), 4).vocab(), "version 3.0 is numpy's too");
        refused(Files.write(tmp.resolve("twice.npy"), npy(1, "<f4", false, "(4,), 'shape': (2, 2)", v)), 4, "key 'shape' given twice (numpy would take the last)");
        refused(Files.write(tmp.resolve("vocab.npy"), npy(1, "<f4", false, "(4,)", v)), 5, "vocabulary is V = 5");
        byte[] whole = npy(1, "<f4", false, "(4,)", v);
        refused(Files.write(tmp.resolve("cut.npy"), Arrays.copyOf(whole, whole.length - 3)), 4, "data is 13 bytes");
        refused(Files.write(tmp.resolve("header.npy"), Arrays.copyOf(whole, 40)), 4, "header runs past the end");
        refused(Files.write(tmp.resolve("fake.npy"), le(v)), 4, "no NumPy magic");
    }

    @Test
    void compareLogitsPassesTheReferencesRowAndFailsAMovedLogit(@TempDir Path tmp) throws IOException {
        ReferenceDump ref = ReferenceDump.open(MINI_DUMP);
        int v = ref.shape("logits")[1], pos = ref.promptIds().length - 1;
        float[] row = Arrays.copyOfRange(ref.f32("logits"), pos * v, (pos + 1) * v);
        CliRun good = k3("compare-logits", Files.write(tmp.resolve("good.bin"), le(row)).toString(), "--reference", MINI_DUMP.toString());
        assertEquals(0, good.exit(), good.out() + good.err());
        assertTrue(good.out().contains("first differing rank  : none") && good.out().contains("VERDICT: CONFORMS"), good.out());
        // the runner-up lifted above the argmax: argmax and rank 0 differ, far over budget
        int top = LogitParity.top(row, 0, v, 2)[0], second = LogitParity.top(row, 0, v, 2)[1];
        float[] bad = row.clone();
        bad[second] = row[top] + 1f;
        CliRun b = k3("compare-logits", Files.write(tmp.resolve("bad.npy"), npy(1, "<f4", false, "(" + v + ",)", bad)).toString(), "--reference", MINI_DUMP.toString());
        assertEquals(1, b.exit(), b.out() + b.err());
        assertTrue(b.out().contains("first differing rank  : 0") && b.out().contains("<- differs") && b.out().contains("[binding error]"), b.out());
        CliRun wrongLength = k3("compare-logits", Files.write(tmp.resolve("short.bin"), le(Arrays.copyOf(row, v - 1))).toString(), "--reference", MINI_DUMP.toString());
        assertEquals(2, wrongLength.exit());
        assertTrue(wrongLength.err().contains("refused"), wrongLength.err());
    }

    static void refused(Path p, int vocab, String why) {
        LogitFile.LogitFileException e = assertThrows(LogitFile.LogitFileException.class, () -> LogitFile.read(p, vocab), p.toString());
        assertTrue(e.getMessage().contains(why), e.getMessage());
    }

    static byte[] le(float[] v) {
        ByteBuffer b = ByteBuffer.allocate(v.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        b.asFloatBuffer().put(v);
        return b.array();
    }

    /** A .npy as NumPy writes it: magic, version, header length, a dict padded with spaces to 64 bytes, the data. */
    static byte[] npy(int major, String descr, boolean fortran, String shape, float[] v) throws IOException {
        String dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
        int pre = major == 1 ? 10 : 12;
        int len = dict.length() + 1;
        int pad = (64 - (pre + len) % 64) % 64;
        String header = dict + " ".repeat(pad) + "\n";
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        o.write(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', (byte) major, 0});
        ByteBuffer n = ByteBuffer.allocate(major == 1 ? 2 : 4).order(ByteOrder.LITTLE_ENDIAN);
        if (major == 1) n.putShort((short) header.length());
        else n.putInt(header.length());
        o.write(n.array());
        o.write(header.getBytes(StandardCharsets.ISO_8859_1));
        o.write(le(v));
        return o.toByteArray();
    }
}
