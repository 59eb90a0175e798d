package k3j.bisect;

import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.model.LayerStages;

/**
 * Per-layer conformance of a layer run with a candidate applied, judged exactly as {@link Conformance#layer}
 * judges the bound layer (the same dump inputs — partial_in and the snapshots the layer sees, fresh state, all
 * T tokens — and the same {@link Conformance#compare}): a candidate passes where the model would.
 */
public final class LayerConformance {
    private final Conformance conformance;
    private final ReferenceDump dump;

    public LayerConformance(Conformance conformance) {
        this.conformance = conformance;
        this.dump = conformance.dump();
    }

    public Conformance conformance() {
        return conformance;
    }

    /** The layer as the model binds it (k3j.compare's own run). */
    public LayerReport check(int layer) {
        return conformance.layer(layer);
    }

    /** The layer with {@code c} applied, from the same inputs. */
    public LayerReport check(LayerRunner runner, int layer, Candidate c) {
        long t0 = System.nanoTime();
        ReferenceDump.LayerInfo info = dump.layer(layer);
        int tokens = conformance.tokens(), hidden = runner.model().config().hiddenSize();
        float[] partialIn = dump.f32("layers." + layer + ".partial_in");
        java.util.List<float[]> snaps = dump.snapshots(info.snapshotsAttn(), tokens, hidden);
        LayerStages st = runner.run(layer, c, partialIn, snaps, tokens);
        return conformance.compare(layer, info, st, forced -> runner.run(layer, c, partialIn, snaps, tokens, forced), t0);
    }

    /** The layer as bound, from the dump's inputs: its stages, for the tokens a failing stage fails. */
    public LayerStages run(LayerRunner runner, int layer) {
        ReferenceDump.LayerInfo info = dump.layer(layer);
        int tokens = conformance.tokens(), hidden = runner.model().config().hiddenSize();
        return runner.run(layer, dump.f32("layers." + layer + ".partial_in"), dump.snapshots(info.snapshotsAttn(), tokens, hidden), tokens);
    }

    /** The experts the reference selects in this layer (any token), or null on a dense layer. */
    public int[] routedExperts(int layer) {
        String key = "layers." + layer + ".moe_idx";
        return dump.has(key) ? dump.i32(key) : null;
    }
}
