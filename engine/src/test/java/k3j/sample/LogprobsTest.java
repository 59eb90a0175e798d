package k3j.sample;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

/** The one log-softmax (docs/fp-contract.md §8): its value from its written order, and the alternatives' order. */
class LogprobsTest {
    @Test
    void theValueIsTheWrittenFormulaRoundedOnce() {
        float[] l = {1.5f, -2.25f, 3.0f, 0.125f, 3.0f};
        double m = 3.0, z = 0;
        for (float x : l) z += StrictMath.exp((double) x - m);
        Logprobs lp = new Logprobs(l, 0, l.length);
        for (int i = 0; i < l.length; i++) assertEquals(Float.floatToRawIntBits((float) ((double) l[i] - m - StrictMath.log(z))), Float.floatToRawIntBits(lp.of(i)), "id " + i);
    }

    @Test
    void alternativesAreByLogprobThenTheLowerId() {
        float[] row = {9f, 0.5f, -3f, 2f, 0.5f, 2f, -1f, 0.5f};
        Logprobs lp = new Logprobs(row, 1, 7);   // ids 0..6 are row[1..7]
        assertArrayEquals(new int[] {2, 4, 0, 3, 6, 5, 1}, lp.top(7));
        assertArrayEquals(new int[] {2, 4, 0}, lp.top(3));
        assertArrayEquals(new int[0], lp.top(0), "no alternatives asked");
        assertArrayEquals(lp.top(7), lp.top(20), "more than the vocabulary: all");
        assertThrows(IllegalArgumentException.class, () -> lp.of(7));
        assertThrows(IllegalArgumentException.class, () -> new Logprobs(row, 2, 7));
    }

    @Test
    void aNaNLogitMakesEveryLogprobNaN() {
        Logprobs lp = new Logprobs(new float[] {1f, Float.NaN, 2f}, 0, 3);
        for (int i = 0; i < 3; i++) assertEquals(Float.NaN, lp.of(i), "id " + i);
    }
}
