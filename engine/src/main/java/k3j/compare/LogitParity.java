package k3j.compare;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import k3j.dump.Budget;
import k3j.dump.ReferenceDump;
import k3j.kernels.Argmax;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * Engine logits against the reference's, the C engine's logit-comparison figures (docs/semantics.md §10.7) at every position:
 * max |diff|, max |diff| / max |ref| against the logits budget, mean |diff|, correlation, top-10 overlap and
 * argmax equality per position; for greedy generation the first step where the ids part, with both top-5 lists.
 */
public final class LogitParity {
    private LogitParity() {}

    /** One logit with its token id. */
    public record Candidate(int id, float logit) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%d (%.5g)", id, logit);
        }
    }

    /**
     * One position (row) of the teacher-forced logits: row t follows ids[0..t] and predicts ids[t+1].
     *
     * @param ratioToBudget max|diff| of the row / max|ref| of the row / budget
     */
    public record Position(int position, int lastId, double maxAbsDiff, double ratioToBudget, int engineArgmax, int referenceArgmax, int top10Overlap) {
        public boolean argmaxEqual() {
            return engineArgmax == referenceArgmax;
        }
    }

    /**
     * @param relToMaxRef       max|diff| / max|ref| over all rows ("relative to max|ref|")
     * @param budget            eps32 · sqrt(hidden) · factor (each logit a dot product over the hidden width)
     * @param argmaxEqual       positions whose argmax agrees, of {@code rows}
     * @param spanArgmaxWrong   rows NP−1 … T−2 (they produced the greedy ids) whose argmax is not the next id: must be none
     * @param diffCorrelation   correlation of the difference (engine − ref) with the reference: a difference over the binding ratio
     *                          that is uncorrelated with it ({@link Causes#noiseLikeLogits}) is {@link Finding#PRECISION}
     */
    public record Result(String mode, int rows, int vocab, int promptLength, double maxAbsDiff, double maxAbsRef, double relToMaxRef,
            double budget, double meanAbsDiff, double correlation, int top10OverlapMin, double top10OverlapMean, int argmaxEqual,
            List<String> spanArgmaxWrong, List<Position> positions, long refFinite, long engineFinite, double diffCorrelation) {
        public double ratioToBudget() {
            return relToMaxRef / budget;
        }

        public Finding finding() {
            if (refFinite != (long) rows * vocab || engineFinite != (long) rows * vocab) return Finding.NON_FINITE;
            Finding f = Finding.ofRatio(ratioToBudget());
            if (f == Finding.BINDING_ERROR && Causes.noiseLikeLogits(diffCorrelation)) return Finding.PRECISION;
            if (f != Finding.CONFORMS && Causes.scaleLike(diffCorrelation)) return Finding.WRONG_FORMULA;
            return f == Finding.CONFORMS && !spanArgmaxWrong.isEmpty() ? Finding.ROUNDING_DRIFT : f;
        }

        /** The logit-comparison block. */
        public String text() {
            StringBuilder sb = new StringBuilder();
            // promptLength > rows: the rows' ids are not known (a plain reference), so there is no prompt and no generated span to check
            boolean span = promptLength <= rows;
            sb.append(String.format(Locale.ROOT, "mode                  : %s, %d positions%s, vocab %d%n", mode, rows, span ? " (prompt " + promptLength + ")" : "", vocab));
            sb.append(String.format(Locale.ROOT, "finite                : ref %d/%d, engine %d/%d%s%n", refFinite, (long) rows * vocab, engineFinite,
                    (long) rows * vocab, finding() == Finding.NON_FINITE ? "   " + Finding.NON_FINITE.tag() : ""));
            sb.append(String.format(Locale.ROOT, "max |diff|            : %.6e%n", maxAbsDiff));
            sb.append(String.format(Locale.ROOT, "relative to max|ref|  : %.6e   (budget %.2e, %.3gx budget)%n", relToMaxRef, budget, ratioToBudget()));
            sb.append(String.format(Locale.ROOT, "mean |diff|           : %.6e%n", meanAbsDiff));
            sb.append(String.format(Locale.ROOT, "correlation           : %.9f   (of the difference with the reference: %.3g)%n", correlation, diffCorrelation));
            sb.append(String.format(Locale.ROOT, "top-10 overlap        : min %d/10, mean %.2f/10%n", top10OverlapMin, top10OverlapMean));
            sb.append(String.format(Locale.ROOT, "argmax equal          : %d/%d positions%n", argmaxEqual, rows));
            sb.append(String.format(Locale.ROOT, "generated span argmax : %s%n", !span ? "not checked (the reference does not say which ids its rows followed)"
                    : spanArgmaxWrong.isEmpty() ? "all equal to the next id" : String.join("; ", spanArgmaxWrong)));
            sb.append(String.format(Locale.ROOT, "%n%4s %6s %12s %10s %8s %8s %6s%n", "pos", "id", "max|diff|", "xbudget", "engine", "ref", "top10"));
            for (Position p : positions) {
                sb.append(String.format(Locale.ROOT, "%4d %6s %12.4e %10.3g %8d %8d %6d%s%n", p.position(), p.lastId() < 0 ? "-" : String.valueOf(p.lastId()), p.maxAbsDiff(), p.ratioToBudget(),
                        p.engineArgmax(), p.referenceArgmax(), p.top10Overlap(), p.argmaxEqual() ? "" : "   <- argmax differs"));
            }
            return sb.toString();
        }
    }

    /**
     * @param firstDivergence the first generated step where the engine's id differs, or −1
     * @param engineTop5      the engine's top-5 at that step (empty when none)
     * @param referenceTop5   the reference's top-5 at that step (teacher-forced row NP−1+step)
     * @param margin          the reference's top-1 − top-2 logit at that step (its float64 value when the dump records it), NaN when equal
     * @param bound           how far an engine within the logits' rounding bound can move that margin, NaN when equal
     */
    public record Greedy(int[] engine, int[] reference, int firstDivergence, List<Candidate> engineTop5, List<Candidate> referenceTop5,
            double margin, double bound) {
        public boolean equal() {
            return firstDivergence < 0;
        }

        /** The ids part where the reference's own top-2 are within the rounding bound: a float32 engine may pick either. */
        public boolean nearTie() {
            return !equal() && margin <= bound;
        }

        public String text() {
            String s = "engine    : " + Arrays.toString(engine) + "\nreference : " + Arrays.toString(reference) + "\n";
            if (equal()) return s + "all " + reference.length + " generated ids equal\n";
            String why = nearTie()
                    ? String.format(Locale.ROOT, "%s the reference's top-1/top-2 margin %.4g is within the rounding bound %.4g: either id is a correct float32 result",
                            Finding.NEAR_TIE.tag(), margin, bound)
                    : String.format(Locale.ROOT, "[real divergence] the reference's top-1/top-2 margin %.4g is %.3gx the rounding bound %.4g", margin, margin / bound, bound);
            return s + "first divergence at generated step " + firstDivergence + ": " + why + "\n  engine top-5    : " + engineTop5
                    + "\n  reference top-5 : " + referenceTop5 + "\n";
        }
    }

    /** Compares [rows][vocab] logits (rows = all T positions). */
    public static Result compare(String mode, float[] engine, float[] reference, int[] ids, int promptLength, int vocab, Budget budget) {
        int rows = ids.length;
        if (reference.length != rows * vocab) throw ReferenceDump.mismatch("the dump's logits hold " + reference.length + " floats, " + rows + " x " + vocab + " expected");
        if (engine.length != reference.length) throw new IllegalStateException("engine logits hold " + engine.length + " floats, " + reference.length + " expected");
        double b = budget.of("logits");
        double worst = 0, refMax = 0, sum = 0;
        double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
        boolean nan = false;
        long refFinite = 0, engineFinite = 0;
        List<Position> positions = new ArrayList<>();
        int topMin = 10, argEq = 0;
        long topSum = 0;
        List<String> spanWrong = new ArrayList<>();
        for (int r = 0; r < rows; r++) {
            double rowDiff = 0, rowRef = 0;
            for (int j = r * vocab; j < (r + 1) * vocab; j++) {
                double x = engine[j], y = reference[j], d = Math.abs(x - y);
                if (Double.isFinite(x)) engineFinite++;
                if (Double.isFinite(y)) refFinite++;
                if (!Double.isFinite(d)) nan = true;
                else rowDiff = Math.max(rowDiff, d);
                rowRef = Math.max(rowRef, Math.abs(y));
                sum += Double.isFinite(d) ? d : 0;
                sx += x; sy += y; sxx += x * x; syy += y * y; sxy += x * y;
            }
            worst = Math.max(worst, rowDiff);
            refMax = Math.max(refMax, rowRef);
            int ea = Argmax.reference(engine, r * vocab, vocab), ra = Argmax.reference(reference, r * vocab, vocab);
            int overlap = overlap(top(engine, r * vocab, vocab, 10), top(reference, r * vocab, vocab, 10));
            topMin = Math.min(topMin, overlap);
            topSum += overlap;
            if (ea == ra) argEq++;
            double rr = rowDiff == 0 ? 0 : rowRef == 0 ? Double.POSITIVE_INFINITY : rowDiff / rowRef / b;
            positions.add(new Position(r, ids[r], rowDiff, rr, ea, ra, overlap));
            if (r >= promptLength - 1 && r <= rows - 2 && ea != ids[r + 1]) {
                spanWrong.add("position " + r + ": engine argmax " + ea + ", next id " + ids[r + 1]);
            }
        }
        if (nan) worst = Double.POSITIVE_INFINITY;
        double n = (double) rows * vocab;
        double cov = sxy / n - (sx / n) * (sy / n), vx = sxx / n - (sx / n) * (sx / n), vy = syy / n - (sy / n) * (sy / n);
        double corr = nan ? Double.NaN : cov / Math.sqrt(vx * vy);
        double rel = worst == 0 ? 0 : refMax == 0 ? Double.POSITIVE_INFINITY : worst / refMax;
        double vd = vx + vy - 2 * cov, diffCorr = nan || !(vd > 0 && vy > 0) ? Double.NaN : (cov - vy) / Math.sqrt(vd * vy);
        return new Result(mode, rows, vocab, promptLength, worst, refMax, rel, b, sum / n, corr, topMin, topSum / (double) rows, argEq,
                List.copyOf(spanWrong), List.copyOf(positions), refFinite, engineFinite, diffCorr);
    }

    /**
     * Greedy ids against the reference's, and at the first divergence both top-5 lists and whether the reference was
     * at a near-tie there: its top-1 − top-2 margin ({@code margins64[step]}, the float64 margins of the dump, or the
     * stored row's when null) against the rounding bound 2 · max(logitAtol, budget · max|ref row|), the most an
     * engine within the logits' tolerance can move the gap between two logits.
     */
    public static Greedy greedy(int[] engine, List<float[]> stepLogits, int[] reference, float[] referenceLogits, int promptLength, int vocab,
                                double[] margins64, double logitAtol, double budget) {
        int first = -1;
        for (int g = 0; g < reference.length; g++) {
            if (g >= engine.length || engine[g] != reference[g]) {
                first = g;
                break;
            }
        }
        if (first < 0) return new Greedy(engine, reference, -1, List.of(), List.of(), Double.NaN, Double.NaN);
        List<Candidate> e = first < stepLogits.size() ? candidates(stepLogits.get(first), 0, vocab, 5) : List.of();
        int off = (promptLength - 1 + first) * vocab;
        List<Candidate> r = candidates(referenceLogits, off, vocab, 5);
        double margin = margins64 != null && first < margins64.length ? margins64[first] : (double) r.get(0).logit() - r.get(1).logit();
        double maxRef = 0;
        for (int j = off; j < off + vocab; j++) maxRef = Math.max(maxRef, Math.abs(referenceLogits[j]));
        double bound = 2 * Math.max(logitAtol, budget * maxRef);
        return new Greedy(engine, reference, first, e, r, margin, bound);
    }

    /** An engine's greedy ids against {@code dump}'s, with the near-tie rule from the dump's float64 margins and its logit tolerance. */
    public static Greedy greedy(ReferenceDump dump, int[] engine, List<float[]> stepLogits) {
        com.fasterxml.jackson.databind.JsonNode m = dump.manifest().path("robustness").path("greedy_top2_margins");
        double[] margins = null;
        if (m.isArray()) {
            margins = new double[m.size()];
            for (int i = 0; i < margins.length; i++) margins[i] = m.get(i).isNumber() ? m.get(i).doubleValue() : Double.NaN;
        }
        com.fasterxml.jackson.databind.JsonNode atol = dump.manifest().path("tolerances").path("logits").path("atol");
        return greedy(engine, stepLogits, dump.generatedIds(), dump.f32("logits"), dump.promptIds().length, dump.shape("logits")[1], margins,
                atol.isNumber() ? atol.doubleValue() : 0, dump.budget().of("logits"));
    }

    /**
     * The first rank at which the two vectors' descending orders (ties: lower id first) name different ids, or
     * −1 when the whole order is the same (rank 0 is the argmax).
     */
    public static int firstDifferingRank(float[] engine, float[] reference) {
        Integer[] e = order(engine), r = order(reference);
        for (int k = 0; k < e.length; k++) if (!e[k].equals(r[k])) return k;
        return -1;
    }

    private static Integer[] order(float[] v) {
        Integer[] idx = new Integer[v.length];
        for (int i = 0; i < idx.length; i++) idx[i] = i;
        java.util.Arrays.sort(idx, (a, b) -> v[a] != v[b] ? Float.compare(v[b], v[a]) : Integer.compare(a, b));
        return idx;
    }

    /** Indices of the k largest values, descending (ties: lower id first). */
    static int[] top(float[] v, int off, int n, int k) {
        k = Math.min(k, n);
        int[] best = new int[k];
        int filled = 0;
        for (int i = 0; i < n; i++) {
            float x = v[off + i];
            int pos = filled;
            while (pos > 0 && x > v[off + best[pos - 1]]) pos--;
            if (pos >= k) continue;
            int end = Math.min(filled, k - 1);
            System.arraycopy(best, pos, best, pos + 1, end - pos);
            best[pos] = i;
            if (filled < k) filled++;
        }
        return best;
    }

    static List<Candidate> candidates(float[] v, int off, int n, int k) {
        List<Candidate> c = new ArrayList<>();
        for (int i : top(v, off, n, k)) c.add(new Candidate(i, v[off + i]));
        return c;
    }

    static int overlap(int[] a, int[] b) {
        int n = 0;
        for (int x : a) for (int y : b) if (x == y) n++;
        return n;
    }

    /**
     * A float32 logits comparison: within budget (and the generated span's argmax the next id); with {@code everyArgmax}
     * (compare-logits' documented rule) also every position's argmax equal.
     */
    public static Invariants.Item item(String what, Result r, boolean everyArgmax) {
        Finding f = r.finding();
        if (f == Finding.NON_FINITE) return Invariants.Item.refused(what, "refused (invariant 1): a non-finite logit");
        if (f != Finding.CONFORMS) return Invariants.Item.fail(what, f.tag() + String.format(Locale.ROOT, " %.3gx the logits budget", r.ratioToBudget()));
        if (everyArgmax && r.argmaxEqual() != r.rows()) return Invariants.Item.fail(what, Finding.ROUNDING_DRIFT.tag() + " argmax differs at " + (r.rows() - r.argmaxEqual()) + " of " + r.rows() + " positions");
        return Invariants.Item.pass(what);
    }

    /** A float32 logits comparison ({@code missing}: why there is none, when {@code r} is null: not judged). */
    public static Invariants.Item logitsItem(Result r, String missing) {
        return r == null ? Invariants.Item.notJudged("logits", missing) : item("logits (" + r.mode() + ")", r, false);
    }

    /** Greedy generation against the reference's ids ({@code missing}: why there is none, when {@code g} is null: not judged). */
    public static Invariants.Item greedyItem(Greedy g, String missing) {
        if (g == null) return Invariants.Item.notJudged("greedy ids", missing);
        return g.equal() || g.nearTie() ? Invariants.Item.pass("greedy ids") : Invariants.Item.fail("greedy ids", "first divergence at generated step " + g.firstDivergence());
    }
}
