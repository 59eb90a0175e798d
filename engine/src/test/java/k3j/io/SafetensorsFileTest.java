package k3j.io;

import static k3j.io.Files8.entry;
import static k3j.io.Files8.write;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import k3j.io.CheckpointException.Rule;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SafetensorsFileTest {
    @TempDir
    Path dir;

    @Test
    void headerOrderIsKeptAndOffsetsAreAbsolute() {
        String h = "{\"b\":" + entry("U8", "[2]", 4, 6) + ",\"a\":" + entry("F32", "[]", 0, 4) + "}   ";
        Path f = write(dir.resolve("x.safetensors"), h, new byte[9]);
        SafetensorsFile s = SafetensorsFile.open(f, 3);
        List<TensorInfo> t = s.tensors();
        assertEquals(List.of("b", "a"), t.stream().map(TensorInfo::name).toList());
        long base = 8 + h.length();
        assertEquals(base + 4, t.get(0).offset());
        assertEquals(2, t.get(0).length());
        assertEquals(3, t.get(0).shard());
        assertEquals(0, t.get(1).rank());
        assertEquals(1, t.get(1).elementCount());
        assertEquals(3, s.trailingBytes(), "9 data bytes, tensors end at 6");
        assertEquals(Map.of(), s.metadata());
    }

    @Test
    void namesAreDecodedExactly() {
        String h = "{\"caf\\u00e9\":" + entry("U8", "[1]", 0, 1) + ",\"\\ud83d\\ude00\\\"\\\\\":" + entry("U8", "[1]", 1, 2) + "}";
        SafetensorsFile s = SafetensorsFile.open(write(dir.resolve("n.safetensors"), h, new byte[2]));
        assertEquals("café", s.tensors().get(0).name());
        assertEquals("😀\"\\", s.tensors().get(1).name());
    }

    @Test
    void anEmptyTensorInsideAnotherIsNotAnOverlap() {
        String h = "{\"a\":" + entry("U8", "[8]", 0, 8) + ",\"e\":" + entry("F32", "[0,3]", 4, 4) + "}";
        assertEquals(2, SafetensorsFile.open(write(dir.resolve("e.safetensors"), h, new byte[8])).tensors().size());
    }

    @Test
    void overlapIsFoundWhateverTheHeaderOrder() {
        // a long tensor first in the data, two short ones after: the third overlaps the first, not the second
        String h = "{\"c\":" + entry("U8", "[2]", 6, 8) + ",\"a\":" + entry("U8", "[10]", 0, 10) + ",\"b\":"
                + entry("U8", "[1]", 2, 3) + "}";
        CheckpointException e = refused(h, 10);
        assertEquals(Rule.OVERLAP, e.rule());
        assertEquals("b", e.tensor());
    }

    @Test
    void aKeyTwiceInOneEntryIsRefused() {
        CheckpointException e = refused("{\"w\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1);
        assertEquals(Rule.BAD_ENTRY, e.rule());
        assertTrue(e.getMessage().contains("appears twice"), e.getMessage());
    }

    @Test
    void rankAbove64IsRefused() {
        String shape = "[" + "1,".repeat(64) + "1]";
        assertEquals(Rule.BAD_SHAPE, refused("{\"w\":" + entry("U8", shape, 0, 1) + "}", 1).rule());
    }

    @Test
    void dtypeTableIsTheSafetensorsOne() {
        assertEquals(4, DType.parse("I32").size());
        assertEquals(2, DType.parse("BF16").size());
        assertEquals(null, DType.parse("bf16"));
        assertEquals(null, DType.parse("F4"));
        assertTrue(DType.U8.widenable() && !DType.I32.widenable());
    }

    @Test
    void messagesEscapeControlCharactersInNames() {
        CheckpointException e = refused("{\"a\\u001b[2Jb\":" + entry("Q4", "[1]", 0, 1) + "}", 1);
        assertEquals(Rule.UNKNOWN_DTYPE, e.rule());
        assertEquals("a\u001b[2Jb", e.tensor());
        assertTrue(e.getMessage().contains("\"a\\u001b[2Jb\""), e.getMessage());
    }

    @Test
    void aDirectoryOrMissingFileIsAnIoError() {
        assertEquals(Rule.IO, assertThrows(CheckpointException.class, () -> SafetensorsFile.open(dir)).rule());
        assertEquals(Rule.IO, assertThrows(CheckpointException.class,
                () -> SafetensorsFile.open(dir.resolve("none.safetensors"))).rule());
    }

    @Test
    void shapesAreCopiedNotShared() {
        String h = "{\"a\":" + entry("U8", "[1,2]", 0, 2) + ",\"b\":" + entry("U8", "[3]", 2, 5) + "}";
        List<TensorInfo> t = SafetensorsFile.open(write(dir.resolve("s.safetensors"), h, new byte[5])).tensors();
        assertArrayEquals(new long[] {1, 2}, t.get(0).shape());
        assertArrayEquals(new long[] {3}, t.get(1).shape());
    }

    private CheckpointException refused(String header, int dataBytes) {
        Path f = write(dir.resolve("bad.safetensors"), header, new byte[dataBytes]);
        return assertThrows(CheckpointException.class, () -> SafetensorsFile.open(f));
    }
}
