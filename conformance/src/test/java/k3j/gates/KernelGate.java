package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import k3j.harness.CaseVerdict;
import k3j.harness.Evidence;
import k3j.harness.KernelFixtures;
import k3j.kernels.Mxfp4;
import k3j.kernels.Workers;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: every kernel, through BOTH its reference and its fast path, reproduces the float64 torch reference of
 * every kernel-level fixture in oracle-fixtures/ops within the fixture's own tolerance (exact where the
 * manifest says so), and the two paths agree bit for bit. Metric per case: the worst
 * |got − want| / (atol + rtol·|want|) over all outputs and both paths (each an item of the one decision, which must say CONFORMS). Level "layer"
 * fixtures (whole decoder layers) are the forward's gate: filtered out here by level, not skipped.
 */
@Tag("kernels")
@Epic("kernels")
class KernelGate {
    private static final Workers TWO = Workers.of(2);

    @AfterAll
    static void close() {
        TWO.close();
    }

    static Stream<KernelFixtures.Fixture> fixtures() {
        List<KernelFixtures.Fixture> l = KernelFixtures.kernelLevel();
        if (l.isEmpty()) fail(KernelFixtures.MANIFEST + " has no kernel-level fixtures");
        return l.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("fixtures")
    void kernelMatchesTheReference(KernelFixtures.Fixture fx) {
        Evidence.parameter("kernel", fx.kernel());
        Map<String, double[]> ref = KernelFixtures.run(fx, false, Workers.serial());
        Map<String, double[]> fast = KernelFixtures.run(fx, true, TWO);
        double worst = 0.0;
        Map<String, Object> report = new LinkedHashMap<>();
        List<Invariants.Item> items = new ArrayList<>();
        for (String out : fx.outputs()) {
            double[] want = fx.want(out).f64();
            double[] tol = fx.tolerance(out);
            for (var path : List.of(Map.entry("reference", ref.get(out)), Map.entry("fast", fast.get(out)))) {
                double[] got = path.getValue();
                if (got.length != want.length) {
                    items.add(Invariants.Item.fail(out + " (" + path.getKey() + ")", got.length + " elements, fixture has " + want.length));
                    worst = Double.POSITIVE_INFINITY;
                    continue;
                }
                double w = 0.0;
                int differing = 0, at = -1;
                for (int i = 0; i < got.length; i++) {
                    double r;
                    if (tol == null) r = Double.doubleToRawLongBits(got[i]) == Double.doubleToRawLongBits(want[i]) ? 0.0 : Double.POSITIVE_INFINITY;
                    else r = Math.abs(got[i] - want[i]) / (tol[0] + tol[1] * Math.abs(want[i]));
                    if (Double.isNaN(r)) r = Double.POSITIVE_INFINITY;
                    if (Finding.ofRatio(r) != Finding.CONFORMS) differing++;
                    if (r > w) {
                        w = r;
                        at = i;
                    }
                }
                report.put(out + " " + path.getKey(), Map.of("worst ratio", w, "differing", differing, "worst at", at,
                        "tolerance", tol == null ? "exact" : "atol " + tol[0] + " rtol " + tol[1]));
                Invariants.Item item = CaseVerdict.ratio(out + " (" + path.getKey() + ")", w);
                items.add(item.status() == Invariants.Status.PASS ? item
                        : Invariants.Item.fail(item.what(), item.why() + ": " + differing + " of " + got.length + " outside, worst at " + at + " got " + got[at] + " want " + want[at]));
                worst = Math.max(worst, w);
            }
            int bits = 0;
            double[] a = ref.get(out), b = fast.get(out);
            for (int i = 0; i < Math.min(a.length, b.length); i++) if (Double.doubleToRawLongBits(a[i]) != Double.doubleToRawLongBits(b[i]) && !(Double.isNaN(a[i]) && Double.isNaN(b[i]))) bits++;
            report.put(out + " reference vs fast: differing bits", bits);
            items.add(CaseVerdict.exact(out + ": fast and reference paths", bits == 0, "differ in " + bits + " elements"));
        }
        Evidence.parameter("worst ratio", worst);
        Evidence.json("per output", report);
        CaseVerdict.assertConforms(fx.name(), items);
        if (fx.kernel().equals("mxfp4_dequant")) swappedNibblesMustDiffer(fx);
    }

    /** The exact dequant fixture must also REJECT the plausible wrong implementation: nibbles swapped. */
    private static void swappedNibblesMustDiffer(KernelFixtures.Fixture fx) {
        int rows = fx.i("rows"), in = fx.i("in");
        MemorySegment p = fx.in("packed").u8();
        for (long i = 0; i < p.byteSize(); i++) {
            int b = p.get(ValueLayout.JAVA_BYTE, i) & 0xFF;
            p.set(ValueLayout.JAVA_BYTE, i, (byte) ((b >>> 4) | (b << 4)));
        }
        float[] swapped = Mxfp4.dequant(p, fx.in("scales").u8(), rows, in);
        double[] want = fx.want("w").f64();
        int differ = 0;
        for (int i = 0; i < want.length; i++) if (Double.doubleToRawLongBits(swapped[i]) != Double.doubleToRawLongBits(want[i])) differ++;
        Evidence.parameter("swapped-nibble elements differing", differ);
        assertTrue(differ > 0, fx.name() + ": dequantising with the nibbles swapped reproduces the fixture: it cannot catch a nibble swap");
        assertEquals(want.length, swapped.length);
    }
}
