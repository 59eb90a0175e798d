package k3j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import k3j.Repo;
import k3j.config.ConfigReader;
import k3j.kernels.Workers;
import org.junit.jupiter.api.Test;

/**
 * The ultra preset's streamed embedding and LM head give the resident tables' bits: every logit of a teacher-forced
 * pass over all positions and of an incremental generation, with LM-head chunks that do not divide the vocabulary
 * (a ragged last chunk) and with one row per chunk.
 */
class StreamedTablesTest {
    static final int[] PROMPT = TinyOracleTest.PROMPT;
    static final int[] GREEDY = TinyOracleTest.GREEDY;

    static Path tiny() {
        return Repo.path("oracle-fixtures/tiny-k3");
    }

    @Test
    void streamedTablesGiveTheResidentBitsAtAnyChunk() {
        try (Assembly a = Assembly.bind(tiny(), ConfigReader.read(tiny().resolve("config.json")), -1); Workers w = Workers.of(2)) {
            a.model(true);
            Forward resident = a.forward(w);
            int[] ids = new int[PROMPT.length + GREEDY.length];
            System.arraycopy(PROMPT, 0, ids, 0, PROMPT.length);
            System.arraycopy(GREEDY, 0, ids, PROMPT.length, GREEDY.length);
            float[] want = resident.full(ids, true, null).logits();
            int v = a.config().vocabSize();
            long rowBytes = 2L * a.config().hiddenSize();
            for (long chunk : new long[] {rowBytes, 7 * rowBytes, 7 * rowBytes + 5, StreamedTables.DEFAULT_CHUNK_BYTES}) {
                try (StreamedTables t = StreamedTables.open(a.binding(), chunk)) {
                    Forward f = resident.streamingTables(t);
                    float[] got = f.full(ids, true, null).logits();
                    assertBits(want, got, "chunk of " + t.chunkRows() + " rows");
                    assertEquals((long) v * rowBytes, t.lmHeadBytesRead(), "the LM head read once");
                    assertEquals(ids.length * rowBytes, t.embeddingBytesRead(), "one embedding row per token");
                    Generation g = Generation.greedy(f, PROMPT, GREEDY.length, true);
                    assertArrayEquals(GREEDY, g.generated());
                    Generation r = Generation.greedy(resident, PROMPT, GREEDY.length, true);
                    for (int s = 0; s < GREEDY.length; s++) assertBits(r.stepLogits().get(s), g.stepLogits().get(s), "incremental step " + s);
                }
            }
            try (StreamedTables one = StreamedTables.open(a.binding(), rowBytes)) {
                assertEquals(1, one.chunkRows());
            }
            assertThrows(IllegalArgumentException.class, () -> StreamedTables.open(a.binding(), rowBytes - 1), "a chunk below one row");
        }
    }

    static void assertBits(float[] want, float[] got, String what) {
        assertEquals(want.length, got.length, what);
        for (int i = 0; i < want.length; i++) {
            if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                throw new AssertionError(what + ": logit " + i + " is " + got[i] + ", resident " + want[i]);
            }
        }
        assertTrue(want.length > 0);
    }
}
