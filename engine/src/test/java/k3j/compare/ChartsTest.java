package k3j.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import k3j.dump.Stage;
import org.junit.jupiter.api.Test;

/** The overview chart's three past defects, checked on its SVG: rows, axis, labels. */
class ChartsTest {
    /** A KDA layer with the eight stages, moe_weight and its state stages; {@code bad} stages get the given ratio to budget. */
    static LayerReport layer(int l, double badRatio, String... bad) {
        List<StageMetric> ms = new ArrayList<>();
        List<String> names = new ArrayList<>(Stage.NAMES);
        names.add(Stage.MOE_WEIGHT);
        names.addAll(List.of("kda_state", "q_conv_state", "k_conv_state", "v_conv_state"));
        for (String st : names) {
            float ref = 1f, eng = List.of(bad).contains(st) ? (float) (1 + badRatio * 1e-6) : 1f;
            ms.add(StageMetric.of(st, 1, new float[] {eng}, new float[] {ref}, 1e-6));
        }
        return Conformance.judge(l, "KDA", ms, null, 0);
    }

    static List<LayerReport> model(LayerReport... special) {
        List<LayerReport> all = new ArrayList<>();
        for (int l = 0; l < 93; l++) all.add(layer(l, 0));
        for (LayerReport r : special) all.set(r.layer(), r);
        return all;
    }

    @Test
    void theHeatmapHasARowForEveryStageTheVerdictsUse() {
        String svg = Charts.overview(model(layer(5, 8.33e5, "k_conv_state")), "t");
        for (String st : List.of("attn_in", "partial_out", "moe_weight", "kda_state", "q_conv_state", "k_conv_state", "v_conv_state")) {
            assertTrue(svg.contains(">" + st + "</text>"), "no heatmap row for " + st);
        }
    }

    @Test
    void theExtremeBarIsDrawnOnItsAxisAndItsLabelBelowTheTitle() {
        String svg = Charts.overview(model(layer(5, 8.33e5, "k_conv_state")), "t");
        assertTrue(svg.contains(">1e6</text>"), "the axis reaches the worst ratio (8.33e+05): " + axisLabels(svg));
        double titleY = y(svg, "worst stage per layer"), labelY = y(svg, "L5 8.33e+05x");
        assertTrue(labelY > titleY + 14, "the bar's label (y " + labelY + ") sits below the title (y " + titleY + ")");
        double captionY = y(svg, "layer (R under a column");
        assertTrue(titleY > captionY + 16, "the bars' title (y " + titleY + ") sits below the heatmap's caption (y " + captionY + ")");
    }

    @Test
    void neighbouringLabelsDoNotOverlapAndEveryFailingLayerIsListed() {
        String svg = Charts.overview(model(layer(5, 8.33e5, "attn_out"), layer(6, 4e5, "attn_out"), layer(7, 3e5, "attn_out")), "t");
        assertTrue(svg.contains(">L5 8.33e+05x</text>"), "the worst bar keeps its label");
        assertFalse(svg.contains(">L6 4.00e+05x</text>"), "a label that would overlap its neighbour's is left out");
        assertTrue(svg.contains("over budget: L5 8.33e+05x (attn_out), L6 4.00e+05x (attn_out), L7 3.00e+05x (attn_out)"), "every layer over budget is listed under the chart");
    }

    static double y(String svg, String text) {
        Matcher m = Pattern.compile("<text x=\"[^\"]+\" y=\"([^\"]+)\"[^>]*>" + Pattern.quote(text)).matcher(svg);
        assertTrue(m.find(), "no text " + text);
        return Double.parseDouble(m.group(1));
    }

    static List<String> axisLabels(String svg) {
        List<String> l = new ArrayList<>();
        Matcher m = Pattern.compile(">(1e-?\\d+)</text>").matcher(svg);
        while (m.find()) l.add(m.group(1));
        return l;
    }

    @Test
    void aConformingModelHasNoOverBudgetList() {
        assertEquals(-1, Charts.overview(model(), "t").indexOf("over budget: L"));
    }
}
