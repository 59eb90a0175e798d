package k3j.compare;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.cache.ExpertLoadException;
import k3j.dump.Budget;
import k3j.dump.ReferenceDump;
import k3j.model.Forward;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * The expert sweep of a dump (docs/formats.md §7.10): every routed expert of a MoE layer on the dump's
 * seeded probes, computed through the forward's own expert path ({@link Forward#probeExpert}: the same expert
 * source — resident or the expert cache —, repacking and kernels as the MoE), and judged against the
 * reference's sketches. Per probe and part x (w1 = W1·z, w3 = W3·z, w2 = W2·v, out = W2·situ(W1·z, W3·z)):
 * {@code ratio = ||S·x_engine − S·x_ref|| / ||x_ref||} against {@code budget[part] = eps32 · sqrt(width) · factor}
 * from the manifest; an expert's verdict is its worst part over the probes, in the bands of {@link Finding}.
 *
 * <p>Why a sketch suffices: for an error e independent of the dump's seed, S·e is Gaussian with covariance
 * ||e||²/k·I, so an error ρ budgets large is missed with probability P(χ²_k ≤ k/ρ²) (the manifest's
 * {@code experts.detection}).
 */
public final class ExpertSweep {
    public static final List<String> PARTS = List.of("w1", "w3", "w2", "out");

    private final ReferenceDump dump;
    private final int probes, k, latent, inter;
    private final float[] projLatent, projInter;
    private final double[] budget = new double[PARTS.size()];

    private ExpertSweep(ReferenceDump dump) {
        this.dump = dump;
        JsonNode e = dump.manifest().get("experts");
        if (e == null || e.isNull()) {
            throw new ConformException(Finding.REFERENCE_MISMATCH, dump.source() + " holds no expert sweep (add one: dump_checkpoint.py MODEL --experts-only --out DUMP)");
        }
        if (!(e.path("complete").isBoolean() && e.path("complete").booleanValue())) {
            throw new ConformException(Finding.REFERENCE_MISMATCH, dump.source() + ": the expert sweep is incomplete (resume it: dump_checkpoint.py MODEL --experts-only --out DUMP)");
        }
        if (!PARTS.equals(strings(dump.field("experts", "parts")))) throw ReferenceDump.mismatch(dump.source() + ": experts.parts is not " + PARTS);
        String w = dump.where() + " experts";
        this.probes = (int) Math.min(Integer.MAX_VALUE, k3j.io.StrictJson.integer(e, "probes", w, ReferenceDump::mismatch));
        this.k = (int) Math.min(Integer.MAX_VALUE, k3j.io.StrictJson.integer(e, "sketch_k", w, ReferenceDump::mismatch));
        int[] sl = dump.shape("experts.proj_latent"), si = dump.shape("experts.proj_inter");
        if (sl.length != 2 || si.length != 2 || sl[0] != k || si[0] != k) throw ReferenceDump.mismatch(dump.source() + ": the sketch projections are not [" + k + "][width]");
        this.latent = sl[1];
        this.inter = si[1];
        this.projLatent = dump.f32("experts.proj_latent");
        this.projInter = dump.f32("experts.proj_inter");
        JsonNode b = k3j.io.StrictJson.object(e, "budget", w, ReferenceDump::mismatch);
        double eps = k3j.io.StrictJson.number(b, "eps32", w + ".budget", ReferenceDump::mismatch), factor = k3j.io.StrictJson.number(b, "factor", w + ".budget", ReferenceDump::mismatch);
        Budget.looseness(eps, factor, dump.source() + " (experts.budget)");
        // a part's width is the length of the dot products behind it: Lt for W1 z and W3 z, I for W2 v and the output
        JsonNode cfg = dump.field("config");
        JsonNode text = cfg.has("text_config") ? cfg.get("text_config") : cfg;
        for (int j = 0; j < budget.length; j++) {
            JsonNode p = k3j.io.StrictJson.object(k3j.io.StrictJson.object(b, "parts", w + ".budget", ReferenceDump::mismatch), PARTS.get(j), w + ".budget.parts", ReferenceDump::mismatch);
            String pw = w + ".budget.parts." + PARTS.get(j);
            int width = k3j.io.StrictJson.int32(k3j.io.StrictJson.need(p, "width", pw, ReferenceDump::mismatch), pw + ".width", ReferenceDump::mismatch);
            String widthKey = j < 2 ? "routed_expert_hidden_size" : "moe_intermediate_size";
            JsonNode want = text.get(widthKey);
            if (want == null || !want.isIntegralNumber() || want.intValue() != width) {
                throw ReferenceDump.mismatch(pw + ".width = " + width + ", but the config's " + widthKey + " is " + want);
            }
            k3j.io.StrictJson.number(p, "budget", pw, ReferenceDump::mismatch);
            budget[j] = eps * Math.sqrt(width) * factor;
            if (Math.abs(p.path("budget").asDouble() - budget[j]) > 1e-9 * budget[j]) {
                throw ReferenceDump.mismatch(dump.source() + ": experts.budget.parts." + PARTS.get(j) + ".budget is not eps32 * sqrt(width) * factor");
            }
        }
    }

    /** The dump's sweep; a dump without one (or with an unfinished one) is a {@link Finding#REFERENCE_MISMATCH}. */
    public static ExpertSweep of(ReferenceDump dump) {
        return new ExpertSweep(dump);
    }

    private static List<String> strings(JsonNode a) {
        List<String> s = new ArrayList<>();
        a.forEach(n -> s.add(n.asText()));
        return s;
    }

    /**
     * P(χ²_k ≤ k/ρ²) for even k: the probability that an error ρ budgets large (independent of the sketch seed) reads
     * as within budget, 1 − e^(−h) Σ_{j<k/2} h^j/j! with h = k/(2ρ²).
     */
    public static double missProbability(int k, double rho) {
        if (k < 2 || k % 2 != 0) throw new IllegalArgumentException("k must be even and positive, got " + k);
        double h = k / (2.0 * rho * rho), term = 1, sum = 1;
        for (int j = 1; j < k / 2; j++) {
            term *= h / j;
            sum += term;
        }
        return Math.max(0.0, 1.0 - Math.exp(-h) * sum);
    }

    public int probes() {
        return probes;
    }

    public int sketchSize() {
        return k;
    }

    public double budget(String part) {
        return budget[PARTS.indexOf(part)];
    }

    /** Floats the dump keeps per expert: probes × parts × (sketch + norm). */
    public int floatsPerExpert() {
        return probes * PARTS.size() * (k + 1);
    }

    /** The probes of one layer. */
    public record Probes(int layer, float[] z, float[] v, float[] sketch, float[] norm, int experts) {}

    /** Layer {@code layer}'s probes and the reference's sketches of every expert. */
    public Probes probes(int layer) {
        String p = "experts." + layer + ".";
        if (!dump.has(p + "sketch")) throw ReferenceDump.mismatch(dump.source() + ": the expert sweep has no layer " + layer);
        int[] s = dump.shape(p + "sketch");
        if (s.length != 4 || s[1] != probes || s[2] != PARTS.size() || s[3] != k) throw ReferenceDump.mismatch(dump.source() + ": " + p + "sketch is not [N][" + probes + "][4][" + k + "]");
        float[] z = dump.f32(p + "probes"), v = dump.f32(p + "probes_inter");
        if (z.length != probes * latent || v.length != probes * inter) throw ReferenceDump.mismatch(dump.source() + ": " + p + "probes do not fit the sketch widths");
        return new Probes(layer, z, v, dump.f32(p + "sketch"), dump.f32(p + "norm"), s[0]);
    }

    /** Every expert of a layer through {@code forward}'s expert path. */
    public ExpertLayerReport layer(Forward forward, int layer, String kind) {
        long t0 = System.nanoTime();
        Probes pr = probes(layer);
        List<ExpertReport> all = new ArrayList<>();
        for (int e = 0; e < pr.experts(); e++) all.add(expert(forward, pr, e));
        return ExpertLayerReport.of(layer, kind, pr.experts(), all, (System.nanoTime() - t0) / 1e9);
    }

    /** Experts {@code from} (inclusive) to {@code to} (exclusive) of a layer of {@code total}, as a shard of the sweep judges them. */
    public record Range(int layer, String kind, int total, int from, int to, List<ExpertReport> experts, double seconds) {}

    /** Experts {@code from}..{@code to}-1 of a layer through {@code forward}'s expert path: a shard's part of the sweep. */
    public Range range(Forward forward, int layer, String kind, int from, int to) {
        long t0 = System.nanoTime();
        Probes pr = probes(layer);
        if (from < 0 || to > pr.experts() || from >= to) throw ReferenceDump.mismatch(dump.source() + ": experts " + from + ".." + (to - 1) + " of L" + layer + ", which has " + pr.experts());
        List<ExpertReport> some = new ArrayList<>();
        for (int e = from; e < to; e++) some.add(expert(forward, pr, e));
        return new Range(layer, kind, pr.experts(), from, to, some, (System.nanoTime() - t0) / 1e9);
    }

    /** One expert of a layer whose probes are loaded. Never throws for the expert's own faults. */
    public ExpertReport expert(Forward forward, Probes pr, int expert) {
        Forward.ExpertProbe got;
        boolean zero;
        try {
            zero = forward.expertCodesAllZero(pr.layer(), expert);
            got = zero ? new Forward.ExpertProbe(new float[probes * inter], new float[probes * inter], new float[probes * latent], new float[probes * latent])
                    : forward.probeExpert(pr.layer(), expert, pr.z(), pr.v(), probes);
        } catch (ExpertLoadException e) {
            return ExpertReport.notRun(pr.layer(), expert, Finding.MISSING_TENSOR, e.getMessage());
        } catch (RuntimeException e) {
            return ExpertReport.notRun(pr.layer(), expert, Finding.BINDING_ERROR, "the expert failed to run: " + e);
        }
        return judge(pr, expert, got, zero);
    }

    /**
     * The verdict on {@code got}, one expert's four parts on the layer's probes as an engine computed them (a
     * caller that also needs the parts themselves computes them once); {@code allZero}: its codes were all +0.
     */
    public ExpertReport judge(Probes pr, int expert, Forward.ExpertProbe got, boolean allZero) {
        float[][] parts = {got.w1(), got.w3(), got.w2(), got.out()};
        double[] ratio = new double[PARTS.size()];
        for (int j = 0; j < parts.length; j++) {
            boolean wide = j < 2;
            float[] proj = wide ? projInter : projLatent;
            int width = wide ? inter : latent;
            for (int p = 0; p < probes; p++) {
                int at = ((expert * probes + p) * PARTS.size() + j);
                double d2 = 0;
                for (int r = 0; r < k; r++) {
                    double s = 0;
                    for (int i = 0; i < width; i++) s += (double) proj[r * width + i] * parts[j][p * width + i];
                    double d = s - pr.sketch()[at * k + r];
                    d2 += d * d;
                }
                double n = pr.norm()[at], diff = Math.sqrt(d2);
                double rt = diff == 0 ? 0.0 : n == 0 || !Double.isFinite(diff) ? Double.POSITIVE_INFINITY : diff / n / budget[j];
                if (!(rt <= ratio[j])) ratio[j] = Double.isNaN(rt) ? Double.POSITIVE_INFINITY : rt;
            }
        }
        return ExpertReport.of(pr.layer(), expert, ratio, allZero);
    }

    /** "sketch k=16 x 4 probes x 4 parts (272 floats per expert); budget w1 3.39e-05 ..." */
    public String describe() {
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "sketch k=%d x %d probes x %d parts (%d floats per expert); budget", k, probes, PARTS.size(), floatsPerExpert()));
        for (int j = 0; j < PARTS.size(); j++) sb.append(String.format(Locale.ROOT, " %s %.3g", PARTS.get(j), budget[j]));
        return sb.toString();
    }
}
