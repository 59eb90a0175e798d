package k3j.conform;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The one decision every verdict goes through, and the invariants it enforces (docs/semantics.md §10.11, numbered
 * there as here). Entry points gather {@link Item}s — what they judged and how it came out — and {@link #decide}
 * turns them into a {@link Verdict}; the checks below run before anything is graded, in the same order for every
 * entry point (conform, conform --lossy, compare-logits, the API, the gates).
 */
public final class Invariants {
    private Invariants() {}

    /** How one judged item came out. */
    public enum Status { PASS, FAIL, NOT_JUDGED, REFUSED }

    /** float32 (the rounding budget) or lossy (graded by thresholds). */
    public enum Mode { FLOAT32, LOSSY }

    /** One thing a verdict covers: what it is, how it came out, and why when not PASS. */
    public record Item(String what, Status status, String why) {
        public static Item pass(String what) {
            return new Item(what, Status.PASS, "");
        }

        public static Item fail(String what, String why) {
            return new Item(what, Status.FAIL, why);
        }

        public static Item notJudged(String what, String why) {
            return new Item(what, Status.NOT_JUDGED, why);
        }

        public static Item refused(String what, String why) {
            return new Item(what, Status.REFUSED, why);
        }

        String line() {
            return why.isEmpty() ? what : what + ": " + why;
        }
    }

    /**
     * The decision. REFUSED when any item broke an invariant; else INCOMPLETE when anything planned was not judged
     * or nothing was judged at all; else DOES NOT CONFORM / OUTSIDE when any item failed; else CONFORMS / WITHIN.
     */
    public static Verdict decide(Mode mode, List<Item> items) {
        List<String> findings = new ArrayList<>(), judged = new ArrayList<>(), notJudged = new ArrayList<>();
        boolean refused = false, failed = false;
        String first = null, category = null;
        for (Item i : items) {
            switch (i.status()) {
                case PASS -> judged.add(i.what());
                case FAIL -> {
                    judged.add(i.what());
                    findings.add(i.line());
                    failed = true;
                }
                case NOT_JUDGED -> notJudged.add(i.line());
                case REFUSED -> {
                    findings.add(i.line());
                    refused = true;
                }
            }
            if (i.status() == Status.FAIL || i.status() == Status.REFUSED) {
                if (first == null) first = i.what();
                if (category == null) category = Verdict.category(i.why());
            }
        }
        if (judged.isEmpty() && notJudged.isEmpty() && !refused) notJudged.add("nothing: no item was judged");
        Verdict.Outcome o = refused ? Verdict.Outcome.REFUSED
                : !notJudged.isEmpty() ? Verdict.Outcome.INCOMPLETE
                : failed ? (mode == Mode.LOSSY ? Verdict.Outcome.OUTSIDE : Verdict.Outcome.DOES_NOT_CONFORM)
                : mode == Mode.LOSSY ? Verdict.Outcome.WITHIN : Verdict.Outcome.CONFORMS;
        return new Verdict(o, findings, judged, notJudged, first, o.green() ? null : category, null, null);
    }

    /**
     * Invariant 1: every value entering a verdict is finite and within {@code magnitude_multiple} · max|reference| of
     * its array ({@link VerdictLimits}); anything else is refused, never graded (a saturated 3.4e38 row would give
     * KL 0 through log-softmax cancellation). Returns the refusal's reason, or null.
     */
    public static String implausible(String what, float[] candidate, float[] reference, VerdictLimits limits) {
        double refMax = 0;
        for (float r : reference) {
            if (!Float.isFinite(r)) return what + ": the reference holds " + r;
            refMax = Math.max(refMax, Math.abs(r));
        }
        double bound = limits.magnitudeMultiple() * refMax;
        for (int j = 0; j < candidate.length; j++) {
            float x = candidate[j];
            if (!Float.isFinite(x)) return what + ": value " + j + " is " + x + " (non-finite)";
            if (Math.abs(x) > bound) {
                return String.format(Locale.ROOT, "%s: value %d is %.4g, beyond %.4g x max|reference| = %.4g (implausible magnitude)", what, j, x,
                        limits.magnitudeMultiple(), refMax, bound);
            }
        }
        return null;
    }

    /** {@link #implausible} as a refusal (a {@link ConformException} naming invariant 1). */
    public static void requirePlausible(String what, float[] candidate, float[] reference, VerdictLimits limits) {
        String why = implausible(what, candidate, reference, limits);
        if (why != null) throw new ConformException(why.contains("non-finite") ? Finding.NON_FINITE : Finding.REFERENCE_MISMATCH, "refused (invariant 1): " + why);
    }

    /**
     * Invariants 2 and 3: a candidate is read and checked the same way by every entry point before any of its values is
     * used: made from this reference (manifest sha256), holding only arrays the reference defines with its dtypes and
     * shapes, and listing only layers the reference has (index within 0..L-1). A layer listed with another mixer or MLP
     * than the reference's is judged where layers are judged ({@code conform}: that layer's [binding error]); a
     * comparison that judges the logits alone refuses it ({@link #requireReferenceLayers}).
     */
    public static void requireCandidateFits(CandidateDump candidate, ReferenceDump reference) {
        candidate.checkAgainst(reference);
        int n = reference.layerCount();
        List<String> problems = new ArrayList<>();
        JsonNode layers = candidate.manifest().path("layers");
        for (int k = 0; k < layers.size(); k++) {
            long index = layers.get(k).path("index").asLong();
            if (index < 0 || index >= n) problems.add("layers[" + k + "].index " + index + " is outside the reference's 0.." + (n - 1));
        }
        refuse(candidate, problems);
    }

    /**
     * Invariant 3 for a comparison that judges no layer (compare-logits): a candidate whose manifest gives a layer another
     * mixer or MLP than the reference's ran another model; its logits are refused, not judged apart from the layer
     * {@code conform --candidate} fails.
     */
    public static void requireReferenceLayers(CandidateDump candidate, ReferenceDump reference) {
        List<String> problems = new ArrayList<>();
        JsonNode layers = candidate.manifest().path("layers");
        for (int k = 0; k < layers.size(); k++) {
            JsonNode l = layers.get(k);
            int index = (int) l.path("index").asLong();
            ReferenceDump.LayerInfo info = reference.layer(index);
            String mixer = l.path("mixer").asText(""), mlp = l.path("mlp").asText("");
            if (!mixer.isEmpty() && !mixer.equalsIgnoreCase(info.mixer())) {
                problems.add("layer " + index + " ran as mixer '" + mixer + "', the reference's is '" + info.mixer().toLowerCase(Locale.ROOT) + "'");
            }
            if (!mlp.isEmpty() && !mlp.equals(info.mlp())) problems.add("layer " + index + " ran with mlp '" + mlp + "', the reference's is '" + info.mlp() + "'");
        }
        refuse(candidate, problems);
    }

    private static void refuse(CandidateDump candidate, List<String> problems) {
        if (!problems.isEmpty()) {
            throw ReferenceDump.mismatch("refused (invariant 3): " + candidate.source() + ": the candidate's layers are not the reference's: "
                    + String.join("; ", problems.subList(0, Math.min(8, problems.size()))));
        }
    }

    /**
     * Invariant 4: a lossy grade's layer items. A layer the candidate could not give is not judged; a layer whose error
     * growth is past {@code growth_limit} carries a binding signature (one layer's stage far outside its kind) and fails.
     */
    public static List<Item> lossyLayers(LossyLayers layers, VerdictLimits limits) {
        List<Item> items = new ArrayList<>();
        for (String r : layers.refused()) items.add(Item.refused("layer stage", r));
        for (LossyLayers.Layer l : layers.layers()) {
            String what = "L" + l.layer() + " " + l.kind();
            if (!l.note().isEmpty()) {
                items.add(Item.notJudged(what, l.note()));
                continue;
            }
            boolean held = false;
            for (double x : l.nmse()) held |= !Double.isNaN(x);
            if (!held) {
                items.add(Item.notJudged(what, "the candidate holds no stage of it"));
                continue;
            }
            double g = l.maxGrowth();
            if (!(g <= limits.growthLimit())) {
                items.add(Item.fail(what, String.format(Locale.ROOT, "binding signature: error growth %.3g at %s, past the limit %.3g of a lossy port",
                        g, Stage.NAMES.get(Math.max(0, l.maxGrowthStage())), limits.growthLimit())));
            } else {
                items.add(Item.pass(what));
            }
        }
        return items;
    }

    /**
     * Invariants 4 and 5: one logits array graded by KL. Thresholds not given take the shipped defaults (nothing is
     * graded without a line to cross); a mean KL near 0 with top-1 agreement far below 100 % contradicts itself and fails.
     */
    public static Item lossyLogits(String what, LossyLogits l, Double maxKl, Double minTop1, VerdictLimits limits) {
        double kl = maxKl != null ? maxKl : limits.defaultMaxKl(), top1 = minTop1 != null ? minTop1 : limits.defaultMinTop1();
        if (l.meanKl() <= limits.klNearZero() && l.sameTop1() < limits.contradictionTop1()) {
            return Item.fail(what, String.format(Locale.ROOT, "contradiction: mean KL %.3g (near 0) with same top-1 %.1f%% (below %.4g%%)",
                    l.meanKl(), l.sameTop1(), limits.contradictionTop1()));
        }
        List<String> why = new ArrayList<>();
        if (!(l.meanKl() <= kl)) why.add(String.format(Locale.ROOT, "mean KL %.4g > %.4g", l.meanKl(), kl));
        if (!(l.sameTop1() >= top1)) why.add(String.format(Locale.ROOT, "same top-1 %.2f%% < %.4g%%", l.sameTop1(), top1));
        return why.isEmpty() ? Item.pass(what) : Item.fail(what, String.join(", ", why));
    }

    /**
     * Invariants 1, 4 and 5 for logits graded against a hosted API's logprobs (docs/semantics.md §10.12): a non-finite
     * candidate value is refused; a mean top-k KL near 0 with same top-1 far below 100 % contradicts itself and fails;
     * otherwise the thresholds decide (the command fills in its defaults when none is given).
     */
    public static Item providerLogits(String what, float[] candidate, ProviderGrade g, ProviderGrade.Thresholds t, VerdictLimits limits) {
        for (int j = 0; j < candidate.length; j++) {
            if (!Float.isFinite(candidate[j])) return Item.refused(what, "value " + j + " is " + candidate[j] + " (non-finite)");
        }
        if (g.meanKl() <= limits.klNearZero() && g.sameTop1Percent() < limits.contradictionTop1()) {
            return Item.fail(what, String.format(Locale.ROOT, "contradiction: mean top-k KL %.3g (near 0) with same top-1 %.1f%% (below %.4g%%)",
                    g.meanKl(), g.sameTop1Percent(), limits.contradictionTop1()));
        }
        if (g.within(t) && t.minTop1Percent() == null && g.sameTop1Percent() < limits.contradictionTop1()) {
            // the thresholds given leave top-1 unjudged: their pass cannot stand beside top-1 agreement this low
            return Item.fail(what, String.format(Locale.ROOT, "contradiction: within %s, yet same top-1 %.1f%% (below %.4g%%)",
                    t.text(), g.sameTop1Percent(), limits.contradictionTop1()));
        }
        return g.within(t) ? Item.pass(what) : Item.fail(what, "outside the thresholds (" + t.text() + ")");
    }

    /**
     * A float32 logits comparison: within budget (and the generated span's argmax the next id); with {@code everyArgmax}
     * (compare-logits' documented rule) also every position's argmax equal.
     */
    public static Item float32Logits(String what, LogitParity.Result r, boolean everyArgmax) {
        Finding f = r.finding();
        if (f == Finding.NON_FINITE) return Item.refused(what, "refused (invariant 1): a non-finite logit");
        if (f != Finding.CONFORMS) return Item.fail(what, f.tag() + String.format(Locale.ROOT, " %.3gx the logits budget", r.ratioToBudget()));
        if (everyArgmax && r.argmaxEqual() != r.rows()) return Item.fail(what, Finding.ROUNDING_DRIFT.tag() + " argmax differs at " + (r.rows() - r.argmaxEqual()) + " of " + r.rows() + " positions");
        return Item.pass(what);
    }

    /**
     * A whole verdict as one item of a larger one ({@code --against}: each candidate's verdict against the reference):
     * green is a pass, REFUSED a refusal, INCOMPLETE not judged, anything else a failure; the why is its VERDICT line
     * and first finding.
     */
    public static Item of(String what, Verdict v) {
        String why = v.line().substring("VERDICT: ".length()) + (v.findings().isEmpty() ? v.notJudged().isEmpty() ? "" : "; not judged: " + v.notJudged().getFirst()
                : "; " + v.findings().getFirst());
        return switch (v.outcome()) {
            case CONFORMS, WITHIN -> Item.pass(what);
            case REFUSED -> Item.refused(what, why);
            case INCOMPLETE -> Item.notJudged(what, why);
            case DOES_NOT_CONFORM, OUTSIDE -> Item.fail(what, why);
        };
    }

    /** A swept MoE layer (every expert of it): a pass, or a failure naming its failing experts. */
    public static Item experts(ExpertLayerReport e) {
        return e.conforms() ? Item.pass("experts of L" + e.layer()) : Item.fail("experts of L" + e.layer(), e.line());
    }

    /** A float32 logits comparison ({@code missing}: why there is none, when {@code r} is null: not judged). */
    public static Item logits(LogitParity.Result r, String missing) {
        return r == null ? Item.notJudged("logits", missing) : float32Logits("logits (" + r.mode() + ")", r, false);
    }

    /** Greedy generation against the reference's ids ({@code missing}: why there is none, when {@code g} is null: not judged). */
    public static Item greedy(LogitParity.Greedy g, String missing) {
        if (g == null) return Item.notJudged("greedy ids", missing);
        return g.equal() || g.nearTie() ? Item.pass("greedy ids") : Item.fail("greedy ids", "first divergence at generated step " + g.firstDivergence());
    }

    /** A float32 layer: a pass, a stage the candidate does not hold (not judged), a non-finite stage (refused), or a failure. */
    public static Item layer(LayerReport r) {
        if (r.conforms()) return Item.pass(r.name());
        return switch (r.finding()) {
            case MISSING_STAGE -> Item.notJudged(r.name(), r.message());
            case NON_FINITE -> Item.refused(r.name(), "refused (invariant 1): " + r.message());
            default -> Item.fail(r.name(), r.message());
        };
    }
}
