package k3j.harness;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import k3j.cache.ExpertLoadException;
import k3j.compare.ExpertSweep;
import k3j.model.Forward;

/**
 * The expert sweep's false-negative rate on planted corruptions: each one judged by the sketch and by its TRUE
 * error (the full, unsketched parts of the corrupted expert against the untouched one, through the engine's
 * expert path), tallied by true-error band and by kind; its evidence and the assertions every measurement makes
 * (nothing missed from {@link #SURE} budgets up, the misses below within the chi-square bound).
 */
public final class DetectionTally {
    /** True-error bands (x budget); from {@link #SURE} up a miss has probability <= 4.4e-6 (k = 16). */
    public static final double[] BANDS = {1, 1.5, 2, 3, 10, 100, Double.POSITIVE_INFINITY};
    public static final double SURE = 3.0;

    private final int k;
    private final int[] planted = new int[BANDS.length - 1], caught = new int[BANDS.length - 1];
    private final TreeMap<String, int[]> byKind = new TreeMap<>();
    private final List<String> missed = new ArrayList<>(), missedSure = new ArrayList<>();
    private int invisible, flaggedInvisible;
    private double expectedMisses;

    public DetectionTally(int sketchSize) {
        this.k = sketchSize;
    }

    /** One corruption: its kind, its spec, its true error (x budget) and whether the sketch flagged it. */
    public void add(String kind, String spec, double truth, boolean flagged) {
        int[] kc = byKind.computeIfAbsent(kind, x -> new int[3]);
        kc[0]++;
        if (!(truth > 1.0)) {
            invisible++;
            if (flagged) flaggedInvisible++;
            return;
        }
        int band = 0;
        while (!(truth <= BANDS[band + 1])) band++;
        planted[band]++;
        kc[1]++;
        expectedMisses += ExpertSweep.missProbability(k, truth);
        if (flagged) {
            caught[band]++;
            kc[2]++;
        } else {
            String m = spec + " (true error " + Evidence.format(truth) + "x budget)";
            missed.add(m);
            if (truth >= SURE) missedSure.add(m);
        }
    }

    /** Every corruption added, visible or not. */
    public int total() {
        return visible() + invisible;
    }

    public int visible() {
        int n = 0;
        for (int p : planted) n += p;
        return n;
    }

    public int caught() {
        int n = 0;
        for (int c : caught) n += c;
        return n;
    }

    /** Corruptions whose true error is {@code lo}..{@code hi} budgets, and how many of them the sketch caught. */
    public int[] band(double lo, double hi) {
        int[] r = new int[2];
        for (int b = 0; b < planted.length; b++) if (BANDS[b] >= lo && BANDS[b + 1] <= hi) {
            r[0] += planted[b];
            r[1] += caught[b];
        }
        return r;
    }

    /** The parameters, the band table (description and attachment) and the per-kind JSON. */
    public void evidence(String what, double seconds) {
        int visible = visible(), hit = caught();
        Evidence.parameter("caught by the sketch", hit + " of " + visible + " with a true error above the budget");
        Evidence.parameter("false-negative rate", String.format(Locale.ROOT, "%d / %d = %.3g (the chi-square bound predicts %.2f misses)", visible - hit, visible,
                visible == 0 ? Double.NaN : (double) (visible - hit) / visible, expectedMisses));
        int[] sure = band(SURE, Double.POSITIVE_INFINITY);
        Evidence.parameter("false-negative rate above " + Evidence.format(SURE) + "x budget", String.format(Locale.ROOT, "%d / %d (95%% upper bound %.3g; bound per corruption %.2g)",
                sure[0] - sure[1], sure[0], sure[0] == 0 ? Double.NaN : 3.0 / sure[0], ExpertSweep.missProbability(k, SURE)));
        Evidence.parameter("true error within budget (invisible by definition)", invisible + ", of which flagged " + flaggedInvisible);
        Evidence.parameter("wall s", String.format(Locale.ROOT, "%.1f", seconds));
        String table = table();
        io.qameta.allure.Allure.description("**The sketch's false-negative rate on " + what + "**\n\n"
                + "True error = max over parts and probes of ||x_corrupt - x_untouched|| / ||x_ref|| / budget, computed in full through the engine's expert path.\n\n" + table);
        Map<String, Object> ev = new LinkedHashMap<>();
        byKind.forEach((kk, v) -> ev.put(kk, Map.of("planted", v[0], "above_budget", v[1], "caught", v[2])));
        ev.put("missed", missed);
        Evidence.json("detection by corruption kind", ev);
        Evidence.text("detection by true error", table);
    }

    /** "| true error (x budget) | corruptions | caught | missed | P(miss) bound |" per band. */
    public String table() {
        StringBuilder t = new StringBuilder("| true error (x budget) | corruptions | caught | missed | P(miss) bound at the band's low edge |\n|---|---:|---:|---:|---:|\n");
        for (int b = 0; b < planted.length; b++) {
            t.append(String.format(Locale.ROOT, "| %s..%s | %d | %d | %d | %.2g |%n", Evidence.format(BANDS[b]), Double.isInfinite(BANDS[b + 1]) ? "inf" : Evidence.format(BANDS[b + 1]),
                    planted[b], caught[b], planted[b] - caught[b], ExpertSweep.missProbability(k, BANDS[b])));
        }
        return t.toString();
    }

    /** Enough visible corruptions to state a rate; none missed from {@link #SURE} budgets up; misses within the chi-square bound. */
    public void check(int atLeastVisible) {
        int visible = visible(), hit = caught();
        assertTrue(visible >= atLeastVisible, "too few corruptions above the budget to state a rate: " + visible);
        assertEquals(List.of(), missedSure, "the sketch missed corruptions " + Evidence.format(SURE) + "x budget or more above it");
        assertTrue(visible - hit <= expectedMisses + 3 * Math.sqrt(expectedMisses) + 1, "more misses (" + (visible - hit) + ") than the chi-square bound allows (" + expectedMisses + "): " + missed);
    }

    /** Expert {@code e}'s four parts on the layer's probes, in full, through {@code f}'s expert path. */
    public static Forward.ExpertProbe probe(Forward f, ExpertSweep sweep, ExpertSweep.Probes pr, int e) {
        try {
            return f.probeExpert(pr.layer(), e, pr.z(), pr.v(), sweep.probes());
        } catch (ExpertLoadException ex) {
            throw new AssertionError(ex.getMessage(), ex);
        }
    }

    /** max over parts and probes of ||x_corrupt − x_untouched|| / ||x_ref|| / budget, unsketched. */
    public static double trueRatio(ExpertSweep sweep, ExpertSweep.Probes pr, Forward.ExpertProbe a, Forward.ExpertProbe b, int e) {
        float[][] x = {a.w1(), a.w3(), a.w2(), a.out()}, y = {b.w1(), b.w3(), b.w2(), b.out()};
        double worst = 0;
        for (int j = 0; j < x.length; j++) {
            int width = x[j].length / sweep.probes();
            for (int p = 0; p < sweep.probes(); p++) {
                double d2 = 0;
                for (int i = 0; i < width; i++) {
                    double d = (double) x[j][p * width + i] - y[j][p * width + i];
                    d2 += d * d;
                }
                double n = pr.norm()[(e * sweep.probes() + p) * ExpertSweep.PARTS.size() + j];
                double r = d2 == 0 ? 0 : Math.sqrt(d2) / n / sweep.budget(ExpertSweep.PARTS.get(j));
                worst = Math.max(worst, Double.isNaN(r) ? Double.POSITIVE_INFINITY : r);
            }
        }
        return worst;
    }
}
