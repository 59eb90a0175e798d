package k3j.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.file.Path;
import k3j.Repo;
import k3j.kernels.Workers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The forward on the tiny oracle checkpoint: the reference's 20 greedy ids, both decoding modes (the full gates are OracleGate). */
class TinyOracleTest {
    static final int[] PROMPT = {250, 17, 101, 3, 199, 64, 128, 42, 7, 230, 88, 155};
    static final int[] GREEDY = {238, 63, 2, 176, 58, 116, 55, 140, 53, 183, 209, 28, 85, 16, 110, 39, 200, 53, 179, 2};

    static Model model;

    static Path tiny() {
        return Repo.path("oracle-fixtures/tiny-k3");
    }

    @BeforeAll
    static void open() {
        model = Model.open(tiny());
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void fullRecomputeGivesTheReferenceIds() {
        Generation g = Generation.greedy(model.forward(Workers.serial()), PROMPT, GREEDY.length, false);
        assertArrayEquals(GREEDY, g.generated());
    }

    @Test
    void incrementalGivesTheReferenceIds() {
        Generation g = Generation.greedy(model.forward(Workers.serial()), PROMPT, GREEDY.length, true);
        assertArrayEquals(GREEDY, g.generated());
    }

    @Test
    void anOverflowingKvCacheIsAnErrorNotStaleData() {
        Forward f = model.forward(Workers.serial());
        DecodeState st = DecodeState.create(model.weights(), 13);
        f.step(PROMPT, st, false, null);
        f.step(new int[] {1}, st, false, null);
        assertEquals(13, st.cached());
        ForwardException e = assertThrows(ForwardException.class, () -> f.step(new int[] {2}, st, false, null));
        assertEquals(true, e.getMessage().contains("exceeds the limit"), e.getMessage());
    }
}
