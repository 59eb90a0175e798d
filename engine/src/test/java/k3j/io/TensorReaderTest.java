package k3j.io;

import static k3j.io.Files8.entry;
import static k3j.io.Files8.write;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import k3j.io.CheckpointException.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TensorReaderTest {
    @TempDir
    Path dir;

    /** Three tensors at awkward offsets: 3 bytes in, straddling a 4 KiB block, and up to EOF. */
    private SafetensorsFile sample(Path file, byte[] data) {
        String h = "{\"small\":" + entry("U8", "[5]", 3, 8) + ",\"straddle\":" + entry("U8", "[6000]", 4000, 10000)
                + ",\"last\":" + entry("U8", "[" + (data.length - 10000) + "]", 10000, data.length) + "}";
        return SafetensorsFile.open(write(file, h, data));
    }

    private static byte[] random(int n) {
        byte[] b = new byte[n];
        new Random(42).nextBytes(b);
        return b;
    }

    private static byte[] slice(byte[] data, TensorInfo t, long dataStart) {
        int from = (int) (t.offset() - dataStart);
        return java.util.Arrays.copyOfRange(data, from, from + (int) t.length());
    }

    @Test
    void readMapAndDirectAgreeWithTheBytes() {
        byte[] data = random(12_345);
        SafetensorsFile s = sample(dir.resolve("r.safetensors"), data);
        try (TensorReader r = new TensorReader(); Arena arena = Arena.ofConfined()) {
            assertTrue(r.directIo(s.file()), "O_DIRECT should work on " + dir + " (ext4)");
            for (TensorInfo t : s.tensors()) {
                byte[] want = slice(data, t, s.dataStart());
                assertArrayEquals(want, r.read(t, arena).toArray(ValueLayout.JAVA_BYTE), t.name());
                assertArrayEquals(want, r.map(t, arena).toArray(ValueLayout.JAVA_BYTE), t.name());
                assertArrayEquals(want, r.readDirect(t, arena).toArray(ValueLayout.JAVA_BYTE), t.name());
            }
        }
    }

    @Test
    void directReadsWorkOnTmpfsToo() throws IOException {
        Path shm = Path.of("/dev/shm");
        if (!Files.isDirectory(shm)) return;   // not Linux: the ext4 test above covers O_DIRECT
        Path d = Files.createTempDirectory(shm, "k3j-io");
        try {
            byte[] data = random(10_500);
            SafetensorsFile s = sample(d.resolve("t.safetensors"), data);
            List<String> notes = new ArrayList<>();
            try (TensorReader r = new TensorReader(DirectIo.O_DIRECT, notes::add); Arena arena = Arena.ofConfined()) {
                for (TensorInfo t : s.tensors()) {
                    assertArrayEquals(slice(data, t, s.dataStart()), r.readDirect(t, arena).toArray(ValueLayout.JAVA_BYTE));
                }
                // kernels before 6.6 refuse O_DIRECT on tmpfs: then exactly one note, and the same bytes
                assertEquals(r.directIo(s.file()) ? 0 : 1, notes.size(), notes.toString());
            }
        } finally {
            try (var files = Files.list(d)) {
                for (Path p : files.toList()) Files.delete(p);
            }
            Files.delete(d);
        }
    }

    @Test
    void aRefusedDirectOpenFallsBackWithOneNote() {
        byte[] data = random(11_000);
        SafetensorsFile s = sample(dir.resolve("f.safetensors"), data);
        List<String> notes = new ArrayList<>();
        DirectIo.Opener refusing = f -> {
            throw new FileSystemException(f.toString(), null, "Invalid argument");
        };
        try (TensorReader r = new TensorReader(refusing, notes::add); Arena arena = Arena.ofConfined()) {
            for (int round = 0; round < 2; round++) {
                for (TensorInfo t : s.tensors()) {
                    assertArrayEquals(slice(data, t, s.dataStart()), r.readDirect(t, arena).toArray(ValueLayout.JAVA_BYTE));
                }
            }
            assertFalse(r.directIo(s.file()));
        }
        assertEquals(1, notes.size(), notes.toString());
        assertTrue(notes.get(0).contains("O_DIRECT refused"), notes.get(0));
    }

    @Test
    void aFileTruncatedAfterOpeningIsAShortReadNamingTheTensor() throws IOException {
        byte[] data = random(12_000);
        SafetensorsFile s = sample(dir.resolve("cut.safetensors"), data);
        TensorInfo last = s.tensors().get(2);
        try (RandomAccessFile raf = new RandomAccessFile(s.file().toFile(), "rw")) {
            raf.setLength(last.offset() + 100);
        }
        try (TensorReader r = new TensorReader(); Arena arena = Arena.ofConfined()) {
            for (boolean direct : new boolean[] {false, true}) {
                CheckpointException e = assertThrows(CheckpointException.class,
                        () -> { if (direct) r.readDirect(last, arena); else r.read(last, arena); });
                assertEquals(Rule.SHORT_READ, e.rule());
                assertEquals("last", e.tensor());
                assertTrue(e.getMessage().contains("after 100 of 2000 bytes"), e.getMessage());
            }
            assertEquals(Rule.SHORT_READ, assertThrows(CheckpointException.class, () -> r.map(last, arena)).rule());
        }
    }

    @Test
    void widenedTensorsComeFromTheRightBytes() {
        // BF16 [2] = {1.0, -2.0}, F16 [1] = 0.5, F32 [1] = pi, U8 [2] = {0, 255}, I32 refused
        byte[] data = Files8.bytes(0x80, 0x3f, 0x00, 0xc0, 0x00, 0x38, 0xdb, 0x0f, 0x49, 0x40, 0, 255, 1, 0, 0, 0);
        String h = "{\"b\":" + entry("BF16", "[2]", 0, 4) + ",\"h\":" + entry("F16", "[1]", 4, 6) + ",\"f\":"
                + entry("F32", "[]", 6, 10) + ",\"u\":" + entry("U8", "[2]", 10, 12) + ",\"i\":" + entry("I32", "[1]", 12, 16) + "}";
        CheckpointIndex idx = CheckpointIndex.open(write(dir.resolve("w.safetensors"), h, data));
        try (TensorReader r = new TensorReader()) {
            assertArrayEquals(new float[] {1f, -2f}, r.readFloats(idx.tensor("b")));
            assertArrayEquals(new float[] {0.5f}, r.readFloats(idx.tensor("h")));
            assertArrayEquals(new float[] {(float) Math.PI}, r.readFloats(idx.tensor("f")));
            assertArrayEquals(new float[] {0f, 255f}, r.readFloats(idx.tensor("u")));
            assertEquals(Rule.NOT_WIDENABLE, assertThrows(CheckpointException.class, () -> r.readFloats(idx.tensor("i"))).rule());
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment raw = r.read(idx.tensor("i"), arena);
                assertEquals(1, raw.get(ValueLayout.JAVA_INT_UNALIGNED.withOrder(java.nio.ByteOrder.LITTLE_ENDIAN), 0));
            }
        }
    }
}
