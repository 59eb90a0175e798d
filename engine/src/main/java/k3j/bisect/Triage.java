package k3j.bisect;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;
import k3j.bisect.Candidate.Family;
import k3j.compare.Conformance;
import k3j.compare.ExpertReport;
import k3j.compare.ExpertSweep;
import k3j.compare.LayerReport;

/**
 * What a failing layer's stages already say, read before any candidate runs, and the order of candidate
 * families it gives. The first stage over budget decides which tensors can be at fault at all (a candidate must
 * reach it). For the MoE output, the routed experts are tested as a family on their own: each expert the
 * reference selects in this layer is re-run on the dump's expert-sweep probes against the reference's sketches
 * (the known-good source). If every one conforms, the error is in the dense path (shared experts, latent
 * projections, norms) and the few dense candidates run before the tens of thousands of expert mix-ups; if some
 * fail, the mix-ups of exactly those experts run first. Without a sweep, the failing tokens decide: a dense tensor
 * changes every token, a routed expert only the tokens that select it.
 *
 * @param stage          the first stage over budget
 * @param ratio          its ratio to budget
 * @param failingTokens  the tokens over budget on that stage
 * @param tokens         all tokens
 * @param routing        "routing agrees (moe_weight 0.2x budget)", "routing differs on 3 of 5 tokens", or "dense layer"
 * @param routed         the distinct experts the reference selects in this layer (empty on a dense layer)
 * @param failingExperts those of them that fail their sweep probes; null when no sweep ran
 * @param sweepNote      why no sweep ran, or null
 * @param order          the families, most likely first
 * @param why            the sentence that says why this order
 * @param nanos          what gathering the evidence took
 */
public record Triage(FaultStage stage, double ratio, List<Integer> failingTokens, int tokens, String routing, List<Integer> routed,
                       List<Integer> failingExperts, String sweepNote, List<Family> order, String why, long nanos) {
    public Triage {
        failingTokens = List.copyOf(failingTokens);
        routed = List.copyOf(routed);
        failingExperts = failingExperts == null ? null : List.copyOf(failingExperts);
        order = List.copyOf(order);
    }

    private static final List<Family> DENSE_FIRST = List.of(Family.SAME_SHAPE_SWAP, Family.STORED_TRANSPOSE, Family.EXPERT_NIBBLE_FLIP,
            Family.EXPERT_W1_W3_SWAP, Family.EXPERT_SWAP);
    private static final List<Family> ROUTED_FIRST = List.of(Family.EXPERT_NIBBLE_FLIP, Family.EXPERT_W1_W3_SWAP, Family.EXPERT_SWAP,
            Family.SAME_SHAPE_SWAP, Family.STORED_TRANSPOSE);

    /**
     * The evidence on {@code failing}: {@code errors} is each token's error on {@code stage} as a ratio to its budget,
     * {@code routedIds} the reference's selection [T][K] (null on a dense layer). {@code reaching}: whether any
     * candidate of a routed family reaches the stage (else the sweep is not worth running).
     */
    static Triage of(Conformance c, LayerReport failing, FaultStage stage, double[] errors, int[] routedIds, boolean routedReach) {
        long t0 = System.nanoTime();
        List<Integer> bad = new ArrayList<>();
        for (int i = 0; i < errors.length; i++) if (!(errors[i] <= 1.0)) bad.add(i);
        TreeSet<Integer> routed = new TreeSet<>();
        if (routedIds != null) for (int e : routedIds) routed.add(e);
        String routing = failing.routing() == null ? "dense layer"
                : !failing.routing().equal() ? String.format(Locale.ROOT, "routing differs on %d of %d tokens", failing.routing().tokensDiffering(), failing.routing().tokens())
                : String.format(Locale.ROOT, "routing selects the same experts (moe_weight %.3gx budget)", FaultStage.ROUTING.ratio(failing));
        List<Integer> failingExperts = null;
        String note = null;
        if (!routedReach) {
            note = "no routed expert reaches " + stage.key;
        } else if (c.dump().manifest().get("experts") == null || c.dump().manifest().get("experts").isNull()) {
            note = "the dump holds no expert sweep";
        } else {
            try {
                ExpertSweep sweep = c.expertSweep();
                ExpertSweep.Probes pr = sweep.probes(failing.layer());
                failingExperts = new ArrayList<>();
                for (int e : routed) {
                    ExpertReport r = sweep.expert(c.forward(), pr, e);
                    if (!r.conforms()) failingExperts.add(e);
                }
            } catch (RuntimeException e) {
                failingExperts = null;
                note = "the expert sweep did not run: " + e.getMessage();
            }
        }
        List<Family> order;
        String why;
        if (!routedReach) {
            order = DENSE_FIRST;
            why = "only dense tensors reach " + stage.key;
        } else if (failingExperts != null && failingExperts.isEmpty()) {
            order = DENSE_FIRST;
            why = "every routed expert the reference selects here (" + routed.size() + ") conforms on its sweep probes: the error is in the dense path";
        } else if (failingExperts != null) {
            order = ROUTED_FIRST;
            why = failingExperts.size() + " of the " + routed.size() + " routed experts fail their sweep probes (" + brief(failingExperts)
                    + "): their own mix-ups first";
        } else if (bad.size() == errors.length) {
            order = DENSE_FIRST;
            why = "every token fails (" + note + "): a dense tensor changes every token";
        } else {
            order = ROUTED_FIRST;
            why = "only tokens " + brief(bad) + " of " + errors.length + " fail (" + note + "): a routed expert changes only the tokens that select it";
        }
        return new Triage(stage, stage.ratio(failing), bad, errors.length, routing, List.copyOf(routed), failingExperts, note, order, why,
                System.nanoTime() - t0);
    }

    /**
     * {@code fitOrdered} (already in {@link Fit} order) ordered by family rank; when the sweep names failing experts,
     * the routed candidates it supports (every routed expert they touch fails its probes) come first, those that
     * account for more of the failing experts before the others (two failing experts swapped with each other is one
     * mix-up that explains both), and the routed candidates it contradicts (they touch a routed expert that conforms) last.
     */
    List<Candidate> order(List<Candidate> fitOrdered) {
        record Ranked(Candidate c, int tier, int unexplained, int family, int at) {}
        List<Ranked> r = new ArrayList<>();
        for (int i = 0; i < fitOrdered.size(); i++) {
            Candidate c = fitOrdered.get(i);
            int unexplained = failingExperts == null ? 0 : (int) failingExperts.stream().filter(e -> !c.experts().contains(e)).count();
            r.add(new Ranked(c, tier(c), tier(c) == 0 ? unexplained : 0, order.indexOf(c.family()), i));
        }
        r.sort(Comparator.comparingInt(Ranked::tier).thenComparingInt(Ranked::unexplained).thenComparingInt(Ranked::family).thenComparingInt(Ranked::at));
        return r.stream().map(Ranked::c).toList();
    }

    /** 0: a routed candidate the sweep supports; 1: no sweep verdict on it (dense, or no failing expert); 2: one it contradicts. */
    private int tier(Candidate c) {
        if (failingExperts == null || failingExperts.isEmpty() || !c.family().routed) return 1;
        boolean any = false;
        for (int e : c.experts()) {
            if (!routed.contains(e)) continue;
            if (!failingExperts.contains(e)) return 2;
            any = true;
        }
        return any ? 0 : 2;
    }

    /** "first stage mlp_out 12.3x budget; 5 of 5 tokens fail; routing agrees (...); the expert sweep: 0 of 80 routed experts fail". */
    public String describe() {
        String sweep = failingExperts != null
                ? String.format(Locale.ROOT, "the expert sweep: %d of %d routed experts fail%s", failingExperts.size(), routed.size(),
                        failingExperts.isEmpty() ? "" : " (" + brief(failingExperts) + ")")
                : "no expert sweep (" + sweepNote + ")";
        return String.format(Locale.ROOT, "first stage over budget %s (%.3gx); %d of %d tokens fail; %s; %s", stage.key, ratio, failingTokens.size(), tokens,
                routing, sweep);
    }

    /** "same-shape swaps, stored transposes, ... (why)". */
    public String familyOrder() {
        return String.join(", ", order.stream().map(f -> f.plural).toList()) + " (" + why + ")";
    }

    private static String brief(List<Integer> ids) {
        List<String> s = ids.stream().limit(8).map(String::valueOf).toList();
        return String.join(", ", s) + (ids.size() > 8 ? ", ..." : "");
    }
}
