package k3j.provider;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.compare.LossyLogits;
import k3j.kernels.Argmax;
import k3j.tokenizer.Tokenizer;
import k3j.verdict.Invariants;
import k3j.verdict.VerdictLimits;

/**
 * A candidate's logits graded against a hosted API's logprobs (docs/semantics.md §10.12), in the terms mlx-lm used to
 * judge its K3 port: per completion position, whether the candidate's top-1 is the provider's, the rank the candidate
 * gives the provider's chosen token and whether it is in the candidate's top-k (k = the alternatives the provider
 * listed), |Δlogprob| = |log_softmax(candidate)[t] − provider logprob of t| over the provider's top-k tokens t, and
 * the KL divergence truncated to those tokens (both distributions renormalised over them, so it is ≥ 0). Everything
 * in double from a log-softmax with the maximum subtracted.
 *
 * @param first the position of row 0 (the last prompt position: its logits predict the first completion token)
 */
public record ProviderGrade(List<Row> rows, int first, double meanAbsDlogprob, double p99AbsDlogprob, double maxAbsDlogprob, double meanKl,
        double maxKl) {

    /**
     * One completion position.
     *
     * @param providerTop   the provider's most likely token (its top_logprobs' largest)
     * @param candidateTop  the candidate's argmax
     * @param chosen        the token the provider emitted
     * @param chosenRank    the candidate's rank of {@code chosen} (0 = its argmax; ties: lower id first)
     * @param k             how many alternatives the provider listed
     * @param maxAbsDlogprob the largest |Δlogprob| over those alternatives
     * @param kl            KL(provider ‖ candidate) over those alternatives, renormalised
     */
    public record Row(int position, int providerTop, int candidateTop, int chosen, int chosenRank, int k, double maxAbsDlogprob, double kl) {
        public boolean sameTop1() {
            return providerTop == candidateTop;
        }

        public boolean chosenInTopK() {
            return chosenRank < k;
        }
    }

    /** The provider's tokens as this model's ids: the chosen token and the alternatives, with the provider's logprobs. */
    public record Ids(int[] chosen, int[][] top, double[][] topLogprob) {
        public int size() {
            return chosen.length;
        }
    }

    /** The thresholds of a verdict; null = not judged by that figure. */
    public record Thresholds(Double minTop1Percent, Double maxMeanAbsDlogprob, Double maxMeanKl) {
        /** Defaults a faithful port meets with room: mlx-lm's disk-streamed port gave 99% same top-1 and a mean |Δlogprob| of 0.005-0.032. */
        public static final double DEFAULT_MIN_TOP1 = 90, DEFAULT_MAX_MEAN_DLOGPROB = 0.1;

        public String text() {
            List<String> parts = new ArrayList<>();
            if (minTop1Percent != null) parts.add(String.format(Locale.ROOT, "same top-1 >= %.4g%%", minTop1Percent));
            if (maxMeanAbsDlogprob != null) parts.add(String.format(Locale.ROOT, "mean |dlogprob| <= %.4g", maxMeanAbsDlogprob));
            if (maxMeanKl != null) parts.add(String.format(Locale.ROOT, "mean top-k KL <= %.4g", maxMeanKl));
            return String.join(", ", parts);
        }
    }

    /**
     * Maps every token of {@code r} to the one id whose bytes it is in {@code tok}; a token that is no single token of
     * the model's tokenizer (or an id past the model's {@code vocab}) is refused, naming it and its position.
     */
    public static Ids ids(ProviderResponse r, Tokenizer tok, int vocab) {
        return ids(r, (c, what) -> id(c, tok, vocab, what));
    }

    /** Maps every token of {@code r} through {@code id} (a choice and what it is, e.g. "completion token 3's alternative 1"), which refuses by name. */
    public static Ids ids(ProviderResponse r, java.util.function.ToIntBiFunction<ProviderResponse.Choice, String> id) {
        int n = r.tokens().size();
        int[] chosen = new int[n];
        int[][] top = new int[n][];
        double[][] lp = new double[n][];
        for (int i = 0; i < n; i++) {
            ProviderResponse.Token t = r.tokens().get(i);
            chosen[i] = id.applyAsInt(t.chosen(), "completion token " + i);
            top[i] = new int[t.top().size()];
            lp[i] = new double[t.top().size()];
            for (int j = 0; j < top[i].length; j++) {
                top[i][j] = id.applyAsInt(t.top().get(j), "completion token " + i + "'s alternative " + j);
                lp[i][j] = t.top().get(j).logprob();
            }
        }
        return new Ids(chosen, top, lp);
    }

    private static int id(ProviderResponse.Choice c, Tokenizer tok, int vocab, String what) {
        int id = tok.id(c.bytes()).orElseThrow(() -> new ProviderResponse.RefusedException(what + " " + c.shown()
                + " is no token of the model's tokenizer (the provider's tokenizer differs, or the bytes were re-split)"));
        if (id >= vocab) throw new ProviderResponse.RefusedException(what + " " + c.shown() + " is id " + id + ", past the model's vocabulary of " + vocab);
        return id;
    }

    /** Grades [ids.size()][vocab] candidate logits, row i being the logits that predict completion token i. */
    public static ProviderGrade grade(float[] candidate, Ids ids, int vocab, int first) {
        int n = ids.size();
        if (candidate.length != (long) n * vocab) throw new IllegalArgumentException("logits: " + candidate.length + " floats, " + n + " x " + vocab + " expected");
        double[] lc = new double[vocab];
        List<Row> rows = new ArrayList<>(n);
        List<Double> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int off = i * vocab;
            LossyLogits.logSoftmax(candidate, off, vocab, lc);
            int[] top = ids.top()[i];
            double[] plp = ids.topLogprob()[i];
            int best = 0;   // the provider's most likely token; ties: lower id
            for (int j = 1; j < top.length; j++) if (plp[j] > plp[best] || plp[j] == plp[best] && top[j] < top[best]) best = j;
            int providerTop = top[best];
            double worst = 0, sp = 0, sq = 0;
            for (int j = 0; j < top.length; j++) {
                double d = Math.abs(lc[top[j]] - plp[j]);
                all.add(d);
                worst = Math.max(worst, d);
                sp += Math.exp(plp[j]);
                sq += Math.exp(lc[top[j]]);
            }
            double kl = 0;
            for (int j = 0; j < top.length; j++) {
                double p = Math.exp(plp[j]) / sp, q = Math.exp(lc[top[j]]) / sq;
                if (p > 0) kl += p * (Math.log(p) - Math.log(q));
            }
            int chosen = ids.chosen()[i];
            float cc = candidate[off + chosen];
            int rank = 0;
            for (int j = 0; j < vocab; j++) {
                float x = candidate[off + j];
                if (x > cc || x == cc && j < chosen) rank++;
            }
            rows.add(new Row(first + i, providerTop, Argmax.reference(candidate, off, vocab), chosen, rank, top.length, worst, Math.max(0, kl)));
        }
        double[] d = all.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        double[] kl = rows.stream().mapToDouble(Row::kl).toArray();
        return new ProviderGrade(List.copyOf(rows), first, Arrays.stream(d).sum() / d.length, LossyLogits.percentile(d, 99), d[d.length - 1],
                Arrays.stream(kl).sum() / kl.length, Arrays.stream(kl).max().orElseThrow());
    }

    public int sameTop1Count() {
        return (int) rows.stream().filter(Row::sameTop1).count();
    }

    public int chosenInTopKCount() {
        return (int) rows.stream().filter(Row::chosenInTopK).count();
    }

    public double sameTop1Percent() {
        return 100.0 * sameTop1Count() / rows.size();
    }

    /** Every threshold given is met: the last of the checks {@link #item} makes before the one decision. */
    public boolean within(Thresholds t) {
        return (t.minTop1Percent() == null || sameTop1Percent() >= t.minTop1Percent())
                && (t.maxMeanAbsDlogprob() == null || meanAbsDlogprob <= t.maxMeanAbsDlogprob())
                && (t.maxMeanKl() == null || meanKl <= t.maxMeanKl());
    }

    public String text() {
        StringBuilder sb = new StringBuilder();
        int n = rows.size();
        sb.append(String.format(Locale.ROOT, "positions             : %d (positions %d..%d predict the completion's %d tokens)%n", n, first, first + n - 1, n));
        sb.append(String.format(Locale.ROOT, "same top-1            : %d/%d (%.2f%%)%n", sameTop1Count(), n, sameTop1Percent()));
        sb.append(String.format(Locale.ROOT, "provider's token      : in the candidate's top-k at %d/%d positions, worst rank %d%n", chosenInTopKCount(), n,
                rows.stream().mapToInt(Row::chosenRank).max().orElseThrow()));
        sb.append(String.format(Locale.ROOT, "|dlogprob| over top-k : mean %.6g, p99 %.6g, max %.6g (nats)%n", meanAbsDlogprob, p99AbsDlogprob, maxAbsDlogprob));
        sb.append(String.format(Locale.ROOT, "KL over top-k         : mean %.6g, max %.6g (nats; provider || candidate, renormalised over the provider's top-k)%n", meanKl, maxKl));
        sb.append(String.format(Locale.ROOT, "%n%4s %8s %8s %8s %6s %12s %12s%n", "pos", "prov top", "cand top", "token", "rank", "max|dlp|", "KL top-k"));
        for (Row r : rows) {
            sb.append(String.format(Locale.ROOT, "%4d %8d %8d %8d %6d %12.4e %12.4e%s%n", r.position(), r.providerTop(), r.candidateTop(), r.chosen(), r.chosenRank(),
                    r.maxAbsDlogprob(), r.kl(), r.sameTop1() ? "" : "   <- top-1 differs"));
        }
        return sb.toString();
    }

    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("convention", "dlogprob = log_softmax(candidate)[t] - provider logprob of t over the provider's top-k; KL(provider || candidate) renormalised over that top-k");
        m.put("positions_compared", rows.size());
        m.put("same_top1", sameTop1Count());
        m.put("same_top1_percent", sameTop1Percent());
        m.put("provider_token_in_candidate_top_k", chosenInTopKCount());
        m.put("abs_dlogprob_mean", meanAbsDlogprob);
        m.put("abs_dlogprob_p99", p99AbsDlogprob);
        m.put("abs_dlogprob_max", maxAbsDlogprob);
        m.put("kl_top_k_mean", meanKl);
        m.put("kl_top_k_max", maxKl);
        List<Map<String, Object>> out = new ArrayList<>();
        for (Row r : rows) {
            Map<String, Object> o = new LinkedHashMap<>();
            o.put("position", r.position());
            o.put("provider_top", r.providerTop());
            o.put("candidate_top", r.candidateTop());
            o.put("provider_token", r.chosen());
            o.put("rank_of_provider_token", r.chosenRank());
            o.put("k", r.k());
            o.put("max_abs_dlogprob", r.maxAbsDlogprob());
            o.put("kl_top_k", r.kl());
            out.add(o);
        }
        m.put("rows", out);
        return m;
    }

    /**
     * Invariants 1, 4 and 5 for logits graded against a hosted API's logprobs (docs/semantics.md §10.12): a non-finite
     * candidate value is refused; a mean top-k KL near 0 with same top-1 far below 100 % contradicts itself and fails;
     * otherwise the thresholds decide (the command fills in its defaults when none is given).
     */
    public Invariants.Item item(String what, float[] candidate, Thresholds t, VerdictLimits limits) {
        for (int j = 0; j < candidate.length; j++) {
            if (!Float.isFinite(candidate[j])) return Invariants.Item.refused(what, "value " + j + " is " + candidate[j] + " (non-finite)");
        }
        if (meanKl <= limits.klNearZero() && sameTop1Percent() < limits.contradictionTop1()) {
            return Invariants.Item.fail(what, String.format(Locale.ROOT, "contradiction: mean top-k KL %.3g (near 0) with same top-1 %.1f%% (below %.4g%%)",
                    meanKl, sameTop1Percent(), limits.contradictionTop1()));
        }
        if (within(t) && t.minTop1Percent() == null && sameTop1Percent() < limits.contradictionTop1()) {
            // the thresholds given leave top-1 unjudged: their pass cannot stand beside top-1 agreement this low
            return Invariants.Item.fail(what, String.format(Locale.ROOT, "contradiction: within %s, yet same top-1 %.1f%% (below %.4g%%)",
                    t.text(), sameTop1Percent(), limits.contradictionTop1()));
        }
        return within(t) ? Invariants.Item.pass(what) : Invariants.Item.fail(what, "outside the thresholds (" + t.text() + ")");
    }
}
