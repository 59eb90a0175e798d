package k3j.compare;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.dump.Budget;
import k3j.dump.CandidateDump;
import k3j.dump.ReferenceDump;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * Where two candidate dumps of one engine part (docs/semantics.md §10.13): the same engine in two modes (chunked
 * against one-shot prefill, a restored against a recomputed state, batched against alone), each run over the same
 * reference's inputs. Layer by layer in index order, stage by stage in the dump's order, token by token: the first
 * place where the two differ at all (the bits), and the first where they differ by more than that stage's rounding
 * budget against the reference's max|ref| (where they part: two float32 runs of one engine may round differently,
 * a mode that loses state does not stay within rounding). The states after the call have no position.
 *
 * @param firstBits  the first difference of any size, or null when the two are the same bits
 * @param parting    the first difference over the budget, or null when they never part
 * @param notCompared the stages one of the two holds and the other does not (not compared: the claim "they do not part" is then not whole)
 */
public record SelfDivergence(Place firstBits, Place parting, int layersCompared, int stagesCompared, List<String> notCompared) {
    public SelfDivergence {
        notCompared = List.copyOf(notCompared);
    }

    /** The stages with one row per token, in the order a layer computes them. */
    static final List<String> TOKEN_STAGES = List.of("attn_in", "attn_norm", "attn_out", "partial_attn", "mlp_in", "mlp_norm", "mlp_out", "partial_out");
    /** The states a KDA layer leaves, compared whole (no position). */
    static final List<String> STATE_STAGES = List.of("q_conv_state", "k_conv_state", "v_conv_state", "kda_state");

    /** One place: the layer, its kind, the stage, the token position (-1: a state after the call), and how far apart. */
    public record Place(int layer, String kind, String stage, int position, double maxAbsDiff, double ratioToBudget) {
        public String text() {
            return String.format(Locale.ROOT, "L%d %s %s %s (max|A-B| %.3e, %.3gx the stage's rounding budget)", layer, kind, stage,
                    position < 0 ? "state after the call" : "position " + position, maxAbsDiff, ratioToBudget);
        }
    }

    /** Compares candidates {@code a} and {@code b}, refused unless both were made from one reference. */
    public static SelfDivergence of(Conformance a, Conformance b) {
        CandidateDump ca = a.candidateDump(), cb = b.candidateDump();
        if (ca == null || cb == null) throw new IllegalArgumentException("two candidate dumps are compared");
        if (!ca.referenceSha256().equals(cb.referenceSha256())) {
            throw new ConformException(Finding.REFERENCE_MISMATCH, cb.source() + " was made from another reference than " + ca.source()
                    + " (manifest sha256 " + cb.referenceSha256() + " against " + ca.referenceSha256() + "): two modes of one engine run one reference's inputs");
        }
        ReferenceDump ref = a.dump();
        Budget budget = ref.budget();
        int t = a.tokens();
        Place bits = null, part = null;
        int layers = 0, stages = 0;
        List<String> notCompared = new ArrayList<>();
        for (int i = 0; i < ca.layerCount() && part == null; i++) {
            if (!ca.lists(i) || !cb.lists(i)) {
                if (ca.lists(i) != cb.lists(i)) notCompared.add("L" + i + " (listed by " + (ca.lists(i) ? ca.source() : cb.source()) + " only)");
                continue;
            }
            layers++;
            String kind = ca.mixer(i).isEmpty() ? "layer" : ca.mixer(i);
            List<String> all = new ArrayList<>(TOKEN_STAGES);
            all.addAll(STATE_STAGES);
            for (String s : all) {
                String key = "layers." + i + "." + s;
                float[] x = ca.array(key), y = cb.array(key);
                if (x == null && y == null) continue;
                if (x == null || y == null) {
                    notCompared.add(key + " (held by " + (x == null ? cb.source() : ca.source()) + " only)");
                    continue;
                }
                if (x.length != y.length) throw new ConformException(Finding.REFERENCE_MISMATCH, "refused: " + key + " holds " + x.length + " values in " + ca.source() + ", " + y.length + " in " + cb.source());
                stages++;
                double maxRef = 0;
                for (float r : ref.f32(key)) maxRef = Math.max(maxRef, Math.abs(r));
                boolean rows = TOKEN_STAGES.contains(s);
                double allowed = (rows ? budget.of(s) : budget.of("attn_in")) * maxRef;   // a state: the hidden width, as conformance judges states
                int width = rows ? x.length / t : x.length;
                for (int p = 0; p < (rows ? t : 1) && part == null; p++) {
                    double d = 0;
                    for (int j = p * width; j < (p + 1) * width; j++) {
                        double e = Math.abs((double) x[j] - y[j]);
                        if (!(e <= d)) d = e;   // NaN on one side counts as apart
                    }
                    if (d == 0) continue;
                    Place here = new Place(i, kind, s, rows ? p : -1, d, allowed > 0 ? d / allowed : Double.POSITIVE_INFINITY);
                    if (bits == null) bits = here;
                    if (!(d <= allowed)) part = here;
                }
                if (part != null) break;
            }
        }
        return new SelfDivergence(bits, part, layers, stages, notCompared);
    }

    public String text() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "compared          : %d layers, %d stages, token by token%n", layersCompared, stagesCompared));
        sb.append("first bits differ : ").append(firstBits == null ? "nowhere (the same bits)" : firstBits.text()).append('\n');
        if (!notCompared.isEmpty()) sb.append("not compared      : ").append(String.join(", ", notCompared.subList(0, Math.min(8, notCompared.size()))))
                .append(notCompared.size() > 8 ? ", ... " + (notCompared.size() - 8) + " more" : "").append('\n');
        sb.append(parting != null ? "A AND B PART AT: " + parting.text() + "\n" : notCompared.isEmpty() ? "A and B do not part: every stage both hold is within its rounding budget\n"
                : "A and B do not part where both hold a stage; " + notCompared.size() + " not compared\n");
        return sb.toString();
    }
}
