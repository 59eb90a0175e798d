package k3j.bisect;

import java.util.ArrayList;
import java.util.List;
import k3j.conform.Budget;
import k3j.conform.Conformance;
import k3j.conform.LayerReport;
import k3j.conform.ReferenceDump;
import k3j.conform.Routing;
import k3j.conform.StageMetric;
import k3j.model.LayerStages;

/**
 * Per-layer conformance of a layer run with a candidate applied, judged exactly as {@link Conformance#layer}
 * judges the bound layer (the same dump inputs — partial_in and the snapshots the layer sees, fresh state, all
 * T tokens — and k3j.conform's StageMetric / Routing / judge): a candidate passes where the model would.
 */
public final class LayerConformance {
    private final Conformance conformance;
    private final ReferenceDump dump;
    private final Budget budget;

    public LayerConformance(Conformance conformance) {
        this.conformance = conformance;
        this.dump = conformance.dump();
        this.budget = conformance.budget();
    }

    public Conformance conformance() {
        return conformance;
    }

    /** The layer as the model binds it (k3j.conform's own run). */
    public LayerReport check(int layer) {
        return conformance.layer(layer);
    }

    /** The layer with {@code c} applied, from the same inputs. */
    public LayerReport check(LayerRunner runner, int layer, Candidate c) {
        long t0 = System.nanoTime();
        ReferenceDump.LayerInfo info = dump.layer(layer);
        int tokens = conformance.tokens(), hidden = runner.model().config().hiddenSize();
        LayerStages st = runner.run(layer, c, dump.f32("layers." + layer + ".partial_in"), dump.snapshots(info.snapshotsAttn(), tokens, hidden), tokens);
        String p = "layers." + layer + ".";
        List<StageMetric> metrics = new ArrayList<>();
        for (Stage s : Stage.values()) {
            if (s == Stage.ROUTING) continue;
            metrics.add(StageMetric.of(s.key, budget.width(s.key), floats(s, st), dump.f32(p + s.key), budget.of(s.key)));
        }
        Routing routing = null;
        if (info.mlp().equals("moe")) {
            routing = Routing.compare(dump.i32(p + "moe_idx"), st.moeIdx(), dump.shape(p + "moe_idx")[1]);
            metrics.add(StageMetric.of("moe_weight", budget.width("moe_weight"), st.moeWeight(), dump.f32(p + "moe_weight"), budget.of("moe_weight")));
        }
        return Conformance.judge(layer, info.kind(), metrics, routing, (System.nanoTime() - t0) / 1e9);
    }

    /** The experts the reference selects in this layer (any token), or null on a dense layer. */
    public int[] routedExperts(int layer) {
        String key = "layers." + layer + ".moe_idx";
        return dump.has(key) ? dump.i32(key) : null;
    }

    private static float[] floats(Stage s, LayerStages st) {
        return switch (s) {
            case ATTN_IN -> st.attnIn();
            case ATTN_NORM -> st.attnNorm();
            case ATTN_OUT -> st.attnOut();
            case PARTIAL_ATTN -> st.partialAttn();
            case MLP_IN -> st.mlpIn();
            case MLP_NORM -> st.mlpNorm();
            case MLP_OUT -> st.mlpOut();
            case PARTIAL_OUT -> st.partialOut();
            case ROUTING -> throw new IllegalArgumentException("routing is ids, not a float stage");
        };
    }
}
