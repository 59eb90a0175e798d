package k3j.bisect;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.TreeSet;
import k3j.cache.ExpertPart;
import k3j.io.TensorInfo;
import k3j.model.LayerBinding;
import k3j.model.Storage;
import k3j.model.TensorBinding;

/**
 * The candidate table of one layer, from its binding alone:
 * <ul>
 * <li>every pair of its dense tensors with the same shape AND dtype, swapped (only such a pair binds either way);
 * <li>every 2-D matrix with both dims above 1, stored transposed (for a square matrix the plain transpose; for
 *     [r][c] the bytes read as [c][r] — the header still binds, so only the values can show it);
 * <li>per routed expert that the reference selects (an unselected expert cannot change the stage): its three
 *     packed parts' nibble order flipped together, then each part alone (the E8M0 scale bytes hold one value
 *     each and have no nibble order); then its w1 and w3 (its two same-shaped parts, packed bytes and scales) swapped;
 * <li>every pair of experts with at least one selected, swapped.
 * </ul>
 */
public final class Candidates {
    private Candidates() {}

    public static List<Candidate> of(LayerBinding layer, int[] routedExperts, int experts) {
        List<TensorBinding> dense = layer.tensors().values().stream()
                .filter(t -> t.storage() != Storage.EXPERT_BYTES)
                .sorted((x, y) -> x.role().compareTo(y.role())).toList();
        List<Candidate> out = new ArrayList<>();
        for (int i = 0; i < dense.size(); i++) {
            for (int j = i + 1; j < dense.size(); j++) {
                TensorInfo a = dense.get(i).info(), b = dense.get(j).info();
                if (a.dtype() == b.dtype() && Arrays.equals(a.shape(), b.shape())) out.add(new Candidate.Swap(dense.get(i).role(), dense.get(j).role()));
            }
        }
        for (TensorBinding t : dense) {
            long[] s = t.info().shape();
            if (t.storage() == Storage.MATRIX && s.length == 2 && s[0] > 1 && s[1] > 1) out.add(new Candidate.Transpose(t.role()));
        }
        if (routedExperts != null && !layer.experts().isEmpty()) {
            TreeSet<Integer> routed = new TreeSet<>();
            for (int e : routedExperts) routed.add(e);
            for (int e : routed) out.addAll(ownMixups(e));
            for (int a = 0; a < experts; a++) {
                for (int b = a + 1; b < experts; b++) if (routed.contains(a) || routed.contains(b)) out.add(new Candidate.ExpertSwap(a, b));
            }
        }
        return out;
    }

    /** One expert's own mix-ups: its three packed parts' nibble order flipped together, then each alone; its w1 and w3 swapped. */
    static List<Candidate> ownMixups(int e) {
        List<ExpertPart> packed = List.of(ExpertPart.W1_PACKED, ExpertPart.W2_PACKED, ExpertPart.W3_PACKED);
        List<Candidate> out = new ArrayList<>();
        out.add(new Candidate.NibbleFlip(e, packed));
        for (ExpertPart p : packed) out.add(new Candidate.NibbleFlip(e, List.of(p)));
        out.add(new Candidate.GateUpSwap(e));
        return out;
    }

    /** The candidates for one failing routed expert (the expert sweep): its own mix-ups, then it swapped with each other expert. */
    public static List<Candidate> ofExpert(int expert, int experts) {
        List<Candidate> out = ownMixups(expert);
        for (int x = 0; x < experts; x++) if (x != expert) out.add(new Candidate.ExpertSwap(Math.min(x, expert), Math.max(x, expert)));
        return out;
    }
}
