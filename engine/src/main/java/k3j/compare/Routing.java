package k3j.compare;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * The MoE routing decisions of one layer compared exactly: the same K experts in the same selection order
 * for every token (docs/formats.md §7.4), with differences at reference near-ties told apart.
 *
 * <p>Near-tie rule: a token whose engine selection differs is a near-tie when, rank by rank, the reference's own
 * selection score of the expert the engine put at rank j is within {@code tolerance} of the reference's score at
 * rank j ({@code |choice[engine_j] − choice[reference_j]| ≤ tolerance} for every j; the engine's K experts
 * distinct). That is exactly what a perturbation of every score by at most tolerance / 2 can produce (the j-th
 * largest value moves by at most the perturbation), so a selection it accepts is explained by float32 score drift,
 * and one it refuses is not: a wrong router weight, bias or norm picks experts whose reference scores are far apart.
 * The tolerance is the dump's drift-derived {@code moe_choice} atol for the layer (docs/formats.md §7.4).
 *
 * @param tokensDiffering tokens whose selection differs
 * @param nearTies        of those, the tokens the near-tie rule explains, each as "token t rank j: reference e1, engine e2 (gap g)"
 * @param first           the first differing token as "token t: reference [a, b, c], engine [a, c, b]", or "" when equal
 * @param tolerance       the score tolerance of the near-tie rule (0: no rule, every difference is a binding error)
 */
public record Routing(int tokens, int topK, int tokensDiffering, List<String> nearTies, String first, double tolerance) {
    public Routing {
        nearTies = List.copyOf(nearTies);
    }

    public Routing(int tokens, int topK, int tokensDiffering, String first) {
        this(tokens, topK, tokensDiffering, List.of(), first, 0);
    }

    public boolean equal() {
        return tokensDiffering == 0;
    }

    /** Some tokens differ and the near-tie rule explains every one of them. */
    public boolean onlyNearTies() {
        return tokensDiffering > 0 && nearTies.size() == tokensDiffering;
    }

    /** Differences the near-tie rule does not explain: a binding error. */
    public boolean wrong() {
        return tokensDiffering > nearTies.size();
    }

    /** {@code engine} null = the engine ran no MoE on a layer the reference routes. Exact: no near-tie rule. */
    public static Routing compare(int[] reference, int[] engine, int topK) {
        return compare(reference, engine, topK, null, 0, 0);
    }

    /**
     * @param choice    the reference's selection scores [T][N] (null: no near-tie rule)
     * @param experts   N
     * @param tolerance the near-tie score tolerance (≤ 0: no near-tie rule)
     */
    public static Routing compare(int[] reference, int[] engine, int topK, float[] choice, int experts, double tolerance) {
        int tokens = reference.length / topK;
        if (engine == null || engine.length != reference.length) {
            return new Routing(tokens, topK, tokens, engine == null ? "the engine ran no MoE on this layer" : "the engine routed " + engine.length + " slots, the reference " + reference.length);
        }
        boolean rule = choice != null && tolerance > 0 && choice.length == tokens * experts;
        int differ = 0;
        String first = "";
        List<String> near = new ArrayList<>();
        for (int t = 0; t < tokens; t++) {
            int[] r = Arrays.copyOfRange(reference, t * topK, (t + 1) * topK), e = Arrays.copyOfRange(engine, t * topK, (t + 1) * topK);
            if (Arrays.equals(r, e)) continue;
            if (differ++ == 0) first = "token " + t + ": reference " + Arrays.toString(r) + ", engine " + Arrays.toString(e);
            if (rule) {
                String why = nearTie(t, r, e, choice, t * experts, experts, tolerance);
                if (why != null) near.add(why);
            }
        }
        return new Routing(tokens, topK, differ, near, first, rule ? tolerance : 0);
    }

    /**
     * Refuses a reference whose routing is not its own scores' selection: at every token, {@code moe_idx} must be
     * K distinct experts of the N, in descending {@code moe_choice} order, none of the others scoring higher than
     * the K-th. The near-tie rule reads score gaps from {@code moe_choice}; a choice array that does not rank the
     * reference's own experts first could make any difference look like a tie.
     */
    public static void checkReference(int[] moeIdx, float[] choice, int topK, int experts, String where) {
        int tokens = moeIdx.length / topK;
        if (choice.length != (long) tokens * experts) throw mismatch(where + ".moe_choice holds " + choice.length + " scores, not " + tokens + " x " + experts);
        boolean[] picked = new boolean[experts];
        for (int t = 0; t < tokens; t++) {
            java.util.Arrays.fill(picked, false);
            int off = t * experts;
            for (int j = 0; j < topK; j++) {
                int e = moeIdx[t * topK + j];
                if (e < 0 || e >= experts || picked[e]) throw mismatch(where + ".moe_idx at token " + t + " rank " + j + " is " + e + ": not one of " + experts + " distinct experts");
                picked[e] = true;
                if (j > 0 && !(choice[off + e] <= choice[off + moeIdx[t * topK + j - 1]])) {
                    throw mismatch(where + ".moe_idx at token " + t + " ranks expert " + e + " below a lower-scoring one in its own moe_choice");
                }
            }
            float kth = choice[off + moeIdx[t * topK + topK - 1]];
            for (int e = 0; e < experts; e++) {
                if (!picked[e] && !(choice[off + e] <= kth)) {
                    throw mismatch(where + ": expert " + e + " scores higher at token " + t + " in moe_choice than the reference's own K-th pick in moe_idx");
                }
            }
        }
    }

    private static ConformException mismatch(String message) {
        return new ConformException(Finding.REFERENCE_MISMATCH, message);
    }

    /** The near-tie explanation of one token's differing selection, or null when the rule refuses it. */
    static String nearTie(int t, int[] ref, int[] eng, float[] choice, int off, int experts, double tolerance) {
        if (Arrays.stream(eng).distinct().count() != eng.length) return null;
        StringBuilder sb = new StringBuilder();
        for (int j = 0; j < ref.length; j++) {
            if (eng[j] < 0 || eng[j] >= experts) return null;
            if (ref[j] == eng[j]) continue;
            double gap = Math.abs((double) choice[off + eng[j]] - choice[off + ref[j]]);
            if (!(gap <= tolerance)) return null;
            if (!sb.isEmpty()) sb.append("; ");
            sb.append(String.format(Locale.ROOT, "token %d rank %d: reference %d, engine %d (reference score gap %.3g)", t, j, ref[j], eng[j], gap));
        }
        return sb.toString();
    }
}
