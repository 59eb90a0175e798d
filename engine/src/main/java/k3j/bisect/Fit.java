package k3j.bisect;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import k3j.compare.LayerReport;
import k3j.compare.StageMetric;
import k3j.dump.ReferenceDump;
import k3j.model.LayerStages;

/**
 * Orders a failing layer's candidates by how well they fit its first failing stage, from the tokens that fail it.
 * A routed expert only changes the tokens that select it; a dense tensor changes every token. So a candidate fits
 * when the tokens it can change cover every failing token (else it cannot explain them all), and fits better the
 * fewer passing tokens it would change (each one would have failed too). Order: covering first, then by passing
 * tokens touched, then the table's own order. At the released width this puts a swapped expert pair among the
 * first few of tens of thousands of candidates.
 */
final class Fit {
    private Fit() {}

    /** Each token's error on {@code stage} as a ratio to the stage's budget (routing: infinite where the selection differs, else 0). */
    static double[] tokenErrors(FaultStage stage, LayerReport failing, LayerStages st, ReferenceDump dump) {
        int t = st.tokens(), layer = failing.layer();
        double[] err = new double[t];
        if (stage == FaultStage.ROUTING) {
            int[] ref = dump.i32("layers." + layer + ".moe_idx");
            int k = ref.length / t;
            for (int i = 0; i < t; i++) {
                for (int j = 0; j < k; j++) if (st.moeIdx() == null || st.moeIdx()[i * k + j] != ref[i * k + j]) err[i] = Double.POSITIVE_INFINITY;
            }
            return err;
        }
        StageMetric m = failing.stages().stream().filter(x -> x.stage().equals(stage.key)).findFirst().orElse(null);
        k3j.dump.Stage cs = k3j.dump.Stage.valueOf(stage.name());
        if (m == null) {
            java.util.Arrays.fill(err, Double.POSITIVE_INFINITY);
            return err;
        }
        float[] got = cs.of(st), want = dump.f32("layers." + layer + "." + stage.key);
        int w = want.length / t;
        for (int i = 0; i < t; i++) {
            double worst = 0;
            for (int j = i * w; j < (i + 1) * w; j++) worst = Math.max(worst, Math.abs((double) got[j] - want[j]));
            err[i] = worst / m.maxAbsRef() / m.budget();
        }
        return err;
    }

    /** {@code candidates} in fit order for the failing tokens, given the reference's routing [T][K] (null on a dense layer). */
    static List<Candidate> order(List<Candidate> candidates, boolean[] failing, int[] routing) {
        return order(candidates, failing, routing, null, null);
    }

    /**
     * The same, with ties among equally covering candidates broken by how well the candidate's routed weight per
     * token follows the tokens' errors (a swapped expert's error grows with its combine weight): the correlation of
     * {@code errors} with Σ weights of the touched experts, highest first. Dense candidates weigh every token alike
     * and stay in table order among themselves. {@code weights} / {@code errors} null: no tie-break.
     */
    static List<Candidate> order(List<Candidate> candidates, boolean[] failing, int[] routing, float[] weights, double[] errors) {
        int t = failing.length;
        record Scored(Candidate c, boolean covers, int passingTouched, double fit, int at) {}
        List<Scored> s = new ArrayList<>();
        for (int n = 0; n < candidates.size(); n++) {
            Candidate c = candidates.get(n);
            boolean[] touched = touchedTokens(c, t, routing);
            boolean covers = true;
            int passing = 0;
            for (int i = 0; i < t; i++) {
                if (failing[i] && !touched[i]) covers = false;
                if (!failing[i] && touched[i]) passing++;
            }
            s.add(new Scored(c, covers, passing, correlation(c, t, routing, weights, errors), n));
        }
        s.sort(Comparator.comparing((Scored x) -> !x.covers()).thenComparingInt(Scored::passingTouched)
                .thenComparing(Comparator.comparingDouble(Scored::fit).reversed()).thenComparingInt(Scored::at));
        return s.stream().map(Scored::c).toList();
    }

    /** Pearson correlation of the token errors with the candidate's touched routed weight per token (0 for a dense candidate). */
    static double correlation(Candidate c, int t, int[] routing, float[] weights, double[] errors) {
        int[] experts = expertsOf(c);
        if (experts == null || routing == null || weights == null || errors == null) return 0;
        int k = routing.length / t;
        double[] w = new double[t], e = new double[t];
        for (int i = 0; i < t; i++) {
            e[i] = Double.isFinite(errors[i]) ? Math.log1p(errors[i]) : 1e9;
            for (int j = 0; j < k; j++) for (int x : experts) if (routing[i * k + j] == x) w[i] += weights[i * k + j];
        }
        double mw = 0, me = 0;
        for (int i = 0; i < t; i++) {
            mw += w[i] / t;
            me += e[i] / t;
        }
        double sw = 0, se = 0, cov = 0;
        for (int i = 0; i < t; i++) {
            sw += (w[i] - mw) * (w[i] - mw);
            se += (e[i] - me) * (e[i] - me);
            cov += (w[i] - mw) * (e[i] - me);
        }
        return sw > 0 && se > 0 ? cov / Math.sqrt(sw * se) : 0;
    }

    private static int[] expertsOf(Candidate c) {
        return switch (c) {
            case Candidate.NibbleFlip f -> new int[] {f.expert()};
            case Candidate.GateUpSwap g -> new int[] {g.expert()};
            case Candidate.ExpertSwap x -> new int[] {x.a(), x.b()};
            case Candidate.Swap s -> null;
            case Candidate.Transpose tr -> null;
        };
    }

    /** The tokens a candidate can change: every token for a dense tensor, the tokens that select a touched expert for an expert. */
    static boolean[] touchedTokens(Candidate c, int t, int[] routing) {
        boolean[] out = new boolean[t];
        int[] experts = expertsOf(c);
        if (experts == null || routing == null) {
            java.util.Arrays.fill(out, true);
            return out;
        }
        int k = routing.length / t;
        for (int i = 0; i < t; i++) {
            for (int j = 0; j < k; j++) for (int e : experts) if (routing[i * k + j] == e) out[i] = true;
        }
        return out;
    }
}
