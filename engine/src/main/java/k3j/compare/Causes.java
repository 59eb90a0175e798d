package k3j.compare;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import k3j.dump.ReferenceDump;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;

/**
 * The cause a run's failing layers point to, from what all of them show together (docs/semantics.md §10.10). A layer
 * alone knows only its band (ratio to budget); the cause needs every selected layer:
 * <ol>
 *   <li>{@link Finding#PRECISION}: at least {@code precision.min_layer_share} of the selected layers are over budget
 *       and in each of those the difference is uncorrelated with the reference (the median over its stages over
 *       budget of |ρ(engine − ref, ref)| ≤ {@code precision.max_abs_correlation}): rounding or noise everywhere;</li>
 *   <li>{@link Finding#WRONG_FORMULA}: of a group of at least {@code systematic.min_layers} selected layers (every
 *       KDA layer, every MLA layer, every AttnRes block-boundary layer, or every layer), at least
 *       {@code systematic.min_share} are first over budget at the same stage: the code of that stage is wrong for
 *       that kind, not one layer's weights; every failing layer of the group gets this cause;</li>
 *   <li>{@link Finding#BINDING_ERROR}: what remains at 100 budgets or more, or with a routing difference, is
 *       localised to its layers: a wrong, swapped or transposed tensor.</li>
 * </ol>
 * Thresholds: {@code k3j/compare/causes.json}. Bands below 100 budgets that are neither precision nor systematic stay
 * {@link Finding#ROUNDING_DRIFT}; non-finite values, missing tensors and stages and refused dumps keep their findings.
 */
public final class Causes {
    /** The thresholds (causes.json). */
    public record Rules(double precisionMaxCorrelation, double precisionMaxLogitCorrelation, double precisionMinLayerShare, int systematicMinLayers, double systematicMinShare,
                        double lossyOutlierFactor, double scaleMinLogitCorrelation) {}

    public static final Rules RULES = load();

    private Causes() {}

    private static Rules load() {
        try (InputStream in = Causes.class.getResourceAsStream("causes.json")) {
            if (in == null) throw new IllegalStateException("k3j/compare/causes.json is missing from the build");
            JsonNode j = new ObjectMapper().readTree(in);
            return new Rules(number(j, "precision", "max_abs_correlation"), number(j, "precision", "max_abs_correlation_logits"), number(j, "precision", "min_layer_share"),
                    (int) number(j, "systematic", "min_layers"), number(j, "systematic", "min_share"), number(j, "lossy", "outlier_factor"),
                    number(j, "scale", "min_abs_correlation_logits"));
        } catch (IOException e) {
            throw new UncheckedIOException("k3j/compare/causes.json: " + e.getMessage(), e);
        }
    }

    private static double number(JsonNode j, String group, String key) {
        JsonNode v = j.path(group).path(key);
        if (!v.isNumber() || !(v.doubleValue() > 0)) throw new IllegalStateException("k3j/compare/causes.json: " + group + "." + key + " is not a positive number");
        return v.doubleValue();
    }

    /** Whether a layer's difference this correlated with the reference is noise-like (rounding, precision), not a wrong computation. */
    public static boolean noiseLike(double correlation) {
        return Math.abs(correlation) <= RULES.precisionMaxCorrelation();
    }

    /**
     * The same for logits, with a tighter bound: logits alone have no layers to show a pattern, and the logits of
     * another prompt differ from the reference's in a way only weakly correlated with them.
     */
    public static boolean noiseLikeLogits(double correlation) {
        return Math.abs(correlation) <= RULES.precisionMaxLogitCorrelation();
    }

    /** A layer the cause rules read: judged by its stages' ratios (not non-finite, missing or refused). */
    static boolean graded(LayerReport r) {
        return !r.stages().isEmpty() && r.missing().isEmpty() && (r.finding() == Finding.ROUNDING_DRIFT || r.finding() == Finding.BINDING_ERROR);
    }

    /** The mixer of a layer kind ("KDA dense" → "KDA"). */
    static String mixer(String kind) {
        int sp = kind.indexOf(' ');
        return sp < 0 ? kind : kind.substring(0, sp);
    }

    /**
     * How correlated a failing layer's difference is with the reference: the median over its stages over budget of
     * |ρ(engine − ref, ref)| (a median: a short stage such as moe_weight alone says little). NaN when none is.
     */
    static double correlation(LayerReport r) {
        double[] c = r.stages().stream().filter(m -> !(m.ratioToBudget() <= 1)).mapToDouble(m -> Math.abs(m.correlation())).sorted().toArray();
        if (c.length == 0) return Double.NaN;
        return c.length % 2 == 1 ? c[c.length / 2] : (c[c.length / 2 - 1] + c[c.length / 2]) / 2;
    }

    /**
     * The selected layers' reports with each failing layer's finding set to its cause and its message retagged and
     * followed by the evidence; passing layers and the findings the rules do not read are returned as they are.
     * {@code dump} says each layer's kind of position (an AttnRes block boundary or not).
     */
    public static List<LayerReport> classify(List<LayerReport> layers, ReferenceDump dump) {
        return classify(layers, l -> dump.layer(l).boundary());
    }

    /**
     * The same from the layers' reports alone: {@code boundary} says which layers sit on an AttnRes block boundary (a
     * merge of shards reads it from what the shards wrote, with every layer's report, and gets the one-machine run's causes).
     */
    public static List<LayerReport> classify(List<LayerReport> layers, java.util.function.IntPredicate boundary) {
        Map<Integer, LayerReport> out = new LinkedHashMap<>();
        for (LayerReport r : layers) out.put(r.layer(), r);
        int n = layers.size();
        List<LayerReport> graded = layers.stream().filter(Causes::graded).toList();
        // 1. precision: (nearly) every layer over budget, each one's difference uncorrelated with the reference
        List<LayerReport> noisy = graded.stream().filter(r -> noiseLike(correlation(r))).toList();
        if (n >= RULES.systematicMinLayers() && noisy.size() >= RULES.precisionMinLayerShare() * n) {
            double worstCorr = noisy.stream().mapToDouble(Causes::correlation).max().orElse(0);
            String why = String.format(Locale.ROOT, "%d of %d layers over budget, each one's difference uncorrelated with the reference (median |rho| over its stages"
                    + " over budget <= %.3g; the largest %.3g): a lower precision or noise, not a wrong computation", noisy.size(), n, RULES.precisionMaxCorrelation(), worstCorr);
            for (LayerReport r : noisy) out.put(r.layer(), retag(r, Finding.PRECISION, why));
        }
        // 2. systematic: a group of layers of one kind (or every layer) first over budget at the same stage
        Map<String, List<LayerReport>> groups = new LinkedHashMap<>();
        for (LayerReport r : layers) groups.computeIfAbsent(mixer(r.kind()) + " layers", k -> new ArrayList<>()).add(r);
        groups.put("AttnRes block-boundary layers", layers.stream().filter(r -> boundary.test(r.layer())).toList());
        groups.put("selected layers", layers);
        for (Map.Entry<String, List<LayerReport>> g : groups.entrySet()) {
            List<LayerReport> group = g.getValue();
            if (group.size() < RULES.systematicMinLayers()) continue;
            Map<String, Integer> byStage = new LinkedHashMap<>();
            for (LayerReport r : group) {
                LayerReport now = out.get(r.layer());
                if (graded(now) && now.firstDivergence() != null) byStage.merge(now.firstDivergence(), 1, Integer::sum);
            }
            for (Map.Entry<String, Integer> s : byStage.entrySet()) {
                if (s.getValue() < RULES.systematicMinShare() * group.size()) continue;
                String why = String.format(Locale.ROOT, "%d of %d %s first over budget at %s: the same stage wrong across a kind of layer is a wrong constant or formula"
                        + " there, not one layer's weights", s.getValue(), group.size(), g.getKey(), s.getKey());
                for (LayerReport r : group) if (graded(out.get(r.layer()))) out.put(r.layer(), retag(out.get(r.layer()), Finding.WRONG_FORMULA, why));
            }
        }
        // 3. binding: what remains at 100 budgets or more (or a routing difference) is localised
        List<LayerReport> bound = out.values().stream().filter(r -> r.finding() == Finding.BINDING_ERROR && !r.stages().isEmpty()).toList();
        for (LayerReport r : bound) {
            long sameKind = layers.stream().filter(x -> mixer(x.kind()).equals(mixer(r.kind()))).count();
            out.put(r.layer(), retag(r, Finding.BINDING_ERROR, String.format(Locale.ROOT, "localised: %d of %d selected layers (of %d %s layers) fail this way",
                    bound.size(), n, sameKind, mixer(r.kind()))));
        }
        return List.copyOf(out.values());
    }

    /**
     * The run-level cause the classified layers name ({@link Finding#WRONG_FORMULA} or {@link Finding#PRECISION}), or
     * null: decided once over every layer, it is the category of every logits line of the run too.
     */
    public static Finding runCause(List<LayerReport> classified) {
        for (LayerReport r : classified) if (r.finding() == Finding.WRONG_FORMULA || r.finding() == Finding.PRECISION) return r.finding();
        return null;
    }

    /** A failing logits item carrying the run's cause ({@link #runCause}) in place of its own band's tag; any other item as it is. */
    public static Invariants.Item carry(Invariants.Item logits, Finding cause) {
        if (cause == null || logits.status() != Invariants.Status.FAIL) return logits;
        for (Finding band : List.of(Finding.ROUNDING_DRIFT, Finding.BINDING_ERROR, Finding.PRECISION, Finding.WRONG_FORMULA)) {
            if (logits.why().startsWith(band.tag())) return Invariants.Item.fail(logits.what(), cause.tag() + logits.why().substring(band.tag().length()));
        }
        return logits;
    }

    /**
     * Whether a logits difference this correlated with the reference is a scale error: the difference a constant
     * multiple of the reference (logits × 1.001 gives correlation 1), so a wrong constant, not rounding drift.
     */
    public static boolean scaleLike(double correlation) {
        return Math.abs(correlation) >= RULES.scaleMinLogitCorrelation();
    }

    /** {@code r} with finding {@code f}: its message's tag replaced and the evidence appended. */
    static LayerReport retag(LayerReport r, Finding f, String evidence) {
        String msg = r.message().startsWith(r.finding().tag()) ? f.tag() + r.message().substring(r.finding().tag().length()) : f.tag() + " " + r.message();
        return new LayerReport(r.layer(), r.kind(), r.stages(), r.routing(), r.missing(), f, msg + "; cause: " + evidence, r.seconds());
    }
}
