package k3j.conform;

import java.util.Arrays;

/**
 * The MoE routing decisions of one layer compared exactly: the same K experts in the same selection order
 * for every token (FORMAT.md §4; the dump certifies no decision sits within float32 drift).
 *
 * @param tokensDiffering tokens whose selection differs
 * @param first           the first differing token as "token t: reference [a, b, c], engine [a, c, b]", or "" when equal
 */
public record Routing(int tokens, int topK, int tokensDiffering, String first) {
    public boolean equal() {
        return tokensDiffering == 0;
    }

    /** {@code engine} null = the engine ran no MoE on a layer the reference routes. */
    public static Routing compare(int[] reference, int[] engine, int topK) {
        int tokens = reference.length / topK;
        if (engine == null || engine.length != reference.length) {
            return new Routing(tokens, topK, tokens, engine == null ? "the engine ran no MoE on this layer" : "the engine routed " + engine.length + " slots, the reference " + reference.length);
        }
        int differ = 0;
        String first = "";
        for (int t = 0; t < tokens; t++) {
            int[] r = Arrays.copyOfRange(reference, t * topK, (t + 1) * topK), e = Arrays.copyOfRange(engine, t * topK, (t + 1) * topK);
            if (!Arrays.equals(r, e)) {
                if (differ++ == 0) first = "token " + t + ": reference " + Arrays.toString(r) + ", engine " + Arrays.toString(e);
            }
        }
        return new Routing(tokens, topK, differ, first);
    }
}
