package k3j.compare;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.kernels.Argmax;
import k3j.verdict.Invariants;
import k3j.verdict.VerdictLimits;

/**
 * A lossy port's logits graded against the reference's instead of judged by the float32 budget (docs/formats.md
 * §9.6), in the convention of llama.cpp's KL-divergence mode: per position the KL divergence
 * KL(reference ‖ candidate) of the two softmax distributions, whether the top token agrees, Δp = p_cand − p_ref of the
 * reference's top token and the rank the candidate gives that token; over positions the mean, median, 99th percentile
 * and maximum KL, the share of positions with the same top token and the RMS of Δp. Everything in double, from
 * log-softmax (max subtracted), so a large logit never overflows.
 *
 * @param positions one row per compared position
 */
public record LossyLogits(List<Row> positions, double meanKl, double medianKl, double p99Kl, double maxKl, double sameTop1, double rmsDeltaP,
        double meanDeltaP) {

    /**
     * One position.
     *
     * @param kl             KL(ref ‖ cand) in nats
     * @param referenceTop   the reference's argmax (first maximal id)
     * @param candidateTop   the candidate's argmax
     * @param deltaP         p_cand(referenceTop) − p_ref(referenceTop)
     * @param rank           the candidate's rank of referenceTop (0 = its argmax too; ties: lower id first)
     */
    public record Row(int position, double kl, int referenceTop, int candidateTop, double deltaP, int rank) {
        public boolean sameTop1() {
            return referenceTop == candidateTop;
        }
    }

    /** Grades [rows][vocab] candidate logits against the reference's; {@code first} is the position of row 0. */
    public static LossyLogits grade(float[] candidate, float[] reference, int rows, int vocab, int first) {
        if (candidate.length != (long) rows * vocab || reference.length != (long) rows * vocab) {
            throw new IllegalArgumentException("logits: " + candidate.length + " and " + reference.length + " floats, " + rows + " x " + vocab + " expected");
        }
        List<Row> out = new ArrayList<>(rows);
        double[] lr = new double[vocab], lc = new double[vocab];
        for (int r = 0; r < rows; r++) {
            int off = r * vocab;
            logSoftmax(reference, off, vocab, lr);
            logSoftmax(candidate, off, vocab, lc);
            double kl = 0;
            for (int j = 0; j < vocab; j++) {
                double p = Math.exp(lr[j]);
                if (p > 0) kl += p * (lr[j] - lc[j]);
            }
            int a = Argmax.reference(reference, off, vocab), b = Argmax.reference(candidate, off, vocab);
            float ca = candidate[off + a];
            int rank = 0;
            for (int j = 0; j < vocab; j++) {
                float x = candidate[off + j];
                if (x > ca || x == ca && j < a) rank++;
            }
            out.add(new Row(first + r, Math.max(0, kl), a, b, Math.exp(lc[a]) - Math.exp(lr[a]), rank));
        }
        return summarise(out);
    }

    static LossyLogits summarise(List<Row> rows) {
        if (rows.isEmpty()) throw new IllegalArgumentException("no position to grade");
        double[] kl = rows.stream().mapToDouble(Row::kl).sorted().toArray();
        double sumDp2 = 0, sumDp = 0;
        int same = 0;
        for (Row r : rows) {
            sumDp2 += r.deltaP() * r.deltaP();
            sumDp += r.deltaP();
            if (r.sameTop1()) same++;
        }
        int n = rows.size();
        return new LossyLogits(List.copyOf(rows), Arrays.stream(kl).sum() / n, percentile(kl, 50), percentile(kl, 99), kl[n - 1],
                100.0 * same / n, Math.sqrt(sumDp2 / n), sumDp / n);
    }

    /** The q-th percentile of ascending {@code v}, linear between closest ranks (numpy's default). */
    public static double percentile(double[] v, double q) {
        double at = q / 100 * (v.length - 1);
        int lo = (int) Math.floor(at), hi = Math.min(v.length - 1, lo + 1);
        return v[lo] + (at - lo) * (v[hi] - v[lo]);
    }

    public static void logSoftmax(float[] x, int off, int n, double[] out) {
        double max = Double.NEGATIVE_INFINITY;
        for (int j = 0; j < n; j++) max = Math.max(max, x[off + j]);
        double sum = 0;
        for (int j = 0; j < n; j++) sum += Math.exp(x[off + j] - max);
        double lse = max + Math.log(sum);
        for (int j = 0; j < n; j++) out[j] = x[off + j] - lse;
    }

    /** Positions whose top token agrees. */
    public int sameTop1Count() {
        return (int) positions.stream().filter(Row::sameTop1).count();
    }

    /** The summary and the per-position table. */
    public String text() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "positions             : %d%n", positions.size()));
        sb.append(String.format(Locale.ROOT, "KL(ref||cand) nats    : mean %.6g, median %.6g, p99 %.6g, max %.6g%n", meanKl, medianKl, p99Kl, maxKl));
        sb.append(String.format(Locale.ROOT, "same top-1            : %.2f%% (%d/%d)%n", sameTop1, sameTop1Count(), positions.size()));
        sb.append(String.format(Locale.ROOT, "RMS dp                : %.4f%%   (mean dp %+.4f%%; dp = p_cand - p_ref of the reference's top token)%n",
                100 * rmsDeltaP, 100 * meanDeltaP));
        sb.append(String.format(Locale.ROOT, "%n%4s %12s %8s %8s %10s %6s%n", "pos", "KL", "ref top", "cand top", "dp %", "rank"));
        for (Row r : positions) {
            sb.append(String.format(Locale.ROOT, "%4d %12.4e %8d %8d %+10.4f %6d%s%n", r.position(), r.kl(), r.referenceTop(), r.candidateTop(),
                    100 * r.deltaP(), r.rank(), r.sameTop1() ? "" : "   <- top-1 differs"));
        }
        return sb.toString();
    }

    /** The whole table as plain data (the --json output and the report). */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("convention", "KL(reference || candidate) of softmax(logits), nats; dp = p_candidate - p_reference of the reference's top token");
        m.put("positions_compared", positions.size());
        m.put("kl_mean", meanKl);
        m.put("kl_median", medianKl);
        m.put("kl_p99", p99Kl);
        m.put("kl_max", maxKl);
        m.put("same_top1_percent", sameTop1);
        m.put("rms_dp", rmsDeltaP);
        m.put("mean_dp", meanDeltaP);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (Row r : positions) {
            Map<String, Object> o = new LinkedHashMap<>();
            o.put("position", r.position());
            o.put("kl", r.kl());
            o.put("reference_top", r.referenceTop());
            o.put("candidate_top", r.candidateTop());
            o.put("dp", r.deltaP());
            o.put("rank_of_reference_top", r.rank());
            rows.add(o);
        }
        m.put("rows", rows);
        return m;
    }

    /**
     * Invariants 4 and 5: one logits array graded by KL. Thresholds not given take the shipped defaults (nothing is
     * graded without a line to cross); a mean KL near 0 with top-1 agreement far below 100 % contradicts itself and fails.
     */
    public Invariants.Item item(String what, Double maxKl, Double minTop1, VerdictLimits limits) {
        double kl = maxKl != null ? maxKl : limits.defaultMaxKl(), top1 = minTop1 != null ? minTop1 : limits.defaultMinTop1();
        if (meanKl <= limits.klNearZero() && sameTop1 < limits.contradictionTop1()) {
            return Invariants.Item.fail(what, String.format(Locale.ROOT, "contradiction: mean KL %.3g (near 0) with same top-1 %.1f%% (below %.4g%%)",
                    meanKl, sameTop1, limits.contradictionTop1()));
        }
        List<String> why = new ArrayList<>();
        if (!(meanKl <= kl)) why.add(String.format(Locale.ROOT, "mean KL %.4g > %.4g", meanKl, kl));
        if (!(sameTop1 >= top1)) why.add(String.format(Locale.ROOT, "same top-1 %.2f%% < %.4g%%", sameTop1, top1));
        return why.isEmpty() ? Invariants.Item.pass(what) : Invariants.Item.fail(what, String.join(", ", why));
    }
}
