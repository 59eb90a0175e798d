package k3j.gates;

import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.harness.CaseVerdict;
import k3j.harness.Evidence;
import k3j.harness.FixtureWeights;
import k3j.harness.KernelFixtures;
import k3j.harness.Project;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.LayerStages;
import k3j.model.LayerWeights;
import k3j.model.ModelWeights;
import k3j.model.WeightLoader;
import k3j.verdict.Invariants;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: one whole decoder layer (AttnRes mixes, block-boundary snapshot, norms, KDA or MLA, LatentMoE),
 * bound by the binder's own suffix table from the fixture's tensors, reproduces the float64 reference of
 * every level-"layer" fixture in oracle-fixtures/ops within the fixture's per-output tolerance. Metric per
 * case: worst |got − want| / (atol + rtol·|want|) over all outputs.
 */
@Tag("oracle")
@Epic("oracle")
class DecoderLayerGate {
    static Stream<KernelFixtures.Fixture> fixtures() {
        List<KernelFixtures.Fixture> l = KernelFixtures.all().stream().filter(f -> f.level().equals("layer")).toList();
        if (l.isEmpty()) fail(KernelFixtures.MANIFEST + " has no level-layer fixtures");
        return l.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fixtures")
    void decoderLayerMatchesTheReference(KernelFixtures.Fixture fx) {
        String cfgPath = fx.node().path("config").asText("");
        if (cfgPath.isEmpty()) fail(fx.name() + ": no 'config' in the manifest");
        ModelConfig c = ConfigReader.read(Project.existing(Project.root().resolve(cfgPath)));
        int index = fx.i("layer_index");
        if (c.isAttnResBoundary(index) != fx.b("boundary")) fail(fx.name() + ": boundary flag disagrees with the config");
        LayerWeights lw = WeightLoader.layer(c, index, FixtureWeights.tensors(fx));
        float[] partial = fx.in("partial").f32();
        KernelFixtures.Array snapArr = fx.in("snapshots");
        int s = snapArr.shape()[0], t = snapArr.shape()[1], e = snapArr.shape()[2];
        float[] all = snapArr.f32();
        List<float[]> snaps = new ArrayList<>();
        for (int i = 0; i < s; i++) snaps.add(Arrays.copyOfRange(all, i * t * e, (i + 1) * t * e));
        ModelWeights mw = new ModelWeights(c, null, List.of(), null, null, null);
        LayerStages st;
        try (Workers w = Workers.of(2)) {
            st = new Forward(mw, FixtureWeights.experts(fx, index), w).runLayer(lw, partial, snaps, t);
        }
        float[] snapsOut = new float[st.snapshotsOut().size() * t * e];
        for (int i = 0; i < st.snapshotsOut().size(); i++) System.arraycopy(st.snapshotsOut().get(i), 0, snapsOut, i * t * e, t * e);
        Map<String, float[]> got = Map.of("partial_out", st.partialOut(), "snapshots_out", snapsOut, "attn_in", st.attnIn(),
                "attn_out", st.attnOut(), "mlp_in", st.mlpIn(), "mlp_out", st.mlpOut());
        Map<String, Double> ratios = new LinkedHashMap<>();
        List<Invariants.Item> items = new ArrayList<>();
        for (String out : fx.outputs()) {
            float[] g = got.get(out);
            if (g == null) {
                items.add(Invariants.Item.notJudged(out, "the layer has no such output"));
                continue;
            }
            double[] want = fx.want(out).f64();
            double[] tol = fx.tolerance(out);
            if (tol == null) fail(fx.name() + ": output " + out + " is exact in the manifest; a float stage needs a tolerance");
            double worst = g.length == want.length ? 0.0 : Double.POSITIVE_INFINITY;
            for (int i = 0; i < Math.min(g.length, want.length); i++) {
                double r = Math.abs(g[i] - want[i]) / (tol[0] + tol[1] * Math.abs(want[i]));
                worst = Math.max(worst, Double.isNaN(r) ? Double.POSITIVE_INFINITY : r);
            }
            ratios.put(out, worst);
            items.add(CaseVerdict.ratio(out + " (atol " + tol[0] + ", rtol " + tol[1] + ")", worst));
        }
        double worst = ratios.values().stream().mapToDouble(Double::doubleValue).max().orElse(Double.POSITIVE_INFINITY);
        Evidence.parameter("layer", index);
        Evidence.parameter("worst ratio to tolerance", worst);
        Evidence.json("ratio per output", ratios);
        CaseVerdict.assertConforms(fx.name() + " layer " + index, items);
    }
}
