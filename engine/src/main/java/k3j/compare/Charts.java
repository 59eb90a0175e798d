package k3j.compare;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.dump.Stage;
import k3j.verdict.Finding;

/**
 * Small SVG charts for the report (plain text, no charting library: two fixed layouts do not justify one).
 * Ratios are drawn on a log scale where 1 is the budget line and 100 the binding-error line.
 */
public final class Charts {
    private Charts() {}

    /** Log scale floor and ceiling of the charts: ratios below 1e-4 budgets are all "deep inside". */
    static final double LO = -4, HI = 4;

    /**
     * The overview: a heatmap of layers (columns) × stages (rows) coloured by ratio to budget, and under it the
     * worst stage per layer as bars on a log axis with the budget (1) and binding-error (100) lines. The rows are
     * every stage the layers were judged on (the eight of every layer, moe_weight, then the state stages such as
     * kda_state and the conv states, in the order first met); the bar axis reaches the largest finite ratio, so
     * no bar is cut off, and a bar's label is drawn only where it overlaps no other label (every layer over budget
     * is also listed under the chart).
     */
    public static String overview(List<LayerReport> reports, String title) {
        List<String> stages = stageRows(reports);
        int n = reports.size();
        double top = HI;
        for (LayerReport rep : reports) {
            double r = rep.worstRatioToBudget();
            if (Double.isFinite(r) && r > 0) top = Math.max(top, Math.ceil(Math.log10(r)) + 1); // a decade above the worst: room for its label
        }
        int cell = Math.max(6, Math.min(24, 1000 / Math.max(1, n))), rowH = 22;
        int left = 110, mapTop = 56, mapW = cell * n, mapH = rowH * stages.size();
        int barTop = mapTop + mapH + 84, barH = (int) Math.max(190, 24 * (top - LO)), legendTop = barTop + barH + 72;
        int width = Math.max(left + mapW + 60, 760), height = legendTop + 64;
        Svg s = new Svg(width, height);
        s.text(left, 22, 16, "bold", "start", title);
        s.text(left, 40, 13, "normal", "start", "colour = max|engine - ref| / max|ref| / budget per stage (log scale); budget = eps32 * sqrt(width) * factor");
        for (int r = 0; r < stages.size(); r++) s.text(left - 6, mapTop + r * rowH + rowH * 0.7, 13, "normal", "end", stages.get(r));
        for (int c = 0; c < n; c++) {
            LayerReport rep = reports.get(c);
            int x = left + c * cell;
            for (int r = 0; r < stages.size(); r++) {
                String st = stages.get(r);
                StageMetric m = rep.stages().stream().filter(q -> q.stage().equals(st)).findFirst().orElse(null);
                int y = mapTop + r * rowH;
                if (m == null) {
                    boolean absent = !rep.stages().isEmpty(); // the layer ran; it has no such stage (a dense layer's moe_weight, an MLA layer's kda_state)
                    s.rect(x, y, cell, rowH, absent ? "#ffffff" : "#9e9e9e", "#e0e0e0", rep.name() + " " + st + ": " + (absent ? "no such stage in this layer" : "not run"));
                } else s.rect(x, y, cell, rowH, colour(m.ratioToBudget()), "#ffffff", rep.name() + " " + st + ": " + fmt(m.ratioToBudget()) + "x budget");
            }
            if (rep.routing() != null && !rep.routing().equal()) s.text(x + cell / 2.0, mapTop + mapH + 12, 10, "bold", "middle", "R");
            if (n <= 40 || rep.layer() % 4 == 0) s.text(x + cell / 2.0, mapTop - 4, 11, "normal", "middle", String.valueOf(rep.layer()));
        }
        s.text(left + mapW / 2.0, mapTop + mapH + 28, 13, "normal", "middle", "layer (R under a column = routing differs; grey = not run; white = no such stage in that layer)");
        // worst stage per layer
        s.text(left, barTop - 24, 14, "bold", "start", "worst stage per layer, ratio to budget (log)");
        LogAxis axis = new LogAxis(left, barTop, mapW, barH, LO, top);
        axis.draw(s, 11);
        List<double[]> placed = new ArrayList<>(); // [left, right] of each bar label drawn
        List<String> over = new ArrayList<>();
        List<Integer> byWorst = new ArrayList<>();
        for (int c = 0; c < n; c++) byWorst.add(c);
        byWorst.sort((a, b) -> Double.compare(reports.get(b).worstRatioToBudget(), reports.get(a).worstRatioToBudget()));
        for (int c = 0; c < n; c++) {
            LayerReport rep = reports.get(c);
            double r = rep.worstRatioToBudget();
            double y = axis.y(r);
            s.rect(left + c * cell + 1, y, Math.max(1, cell - 2), barTop + barH - y, rep.stages().isEmpty() ? "#9e9e9e" : colour(r), null,
                    rep.name() + ": worst " + (rep.worst() == null ? "not run" : rep.worst().stage() + " " + fmt(r) + "x budget"));
        }
        for (int c : byWorst) { // the worst bars claim their label space first
            LayerReport rep = reports.get(c);
            double r = rep.worstRatioToBudget();
            if (!(r > 1) || rep.worst() == null) continue;
            String label = "L" + rep.layer() + " " + fmt(r) + "x";
            over.add(label + " (" + rep.worst().stage() + ")");
            double cx = left + c * cell + cell / 2.0, half = label.length() * 3.3 + 2;
            boolean free = placed.stream().noneMatch(p -> cx - half < p[1] && cx + half > p[0]) && cx - half >= 0 && cx + half <= width;
            if (free) {
                s.text(cx, Math.max(barTop + 12, axis.y(r) - 4), 11, "bold", "middle", label);
                placed.add(new double[] {cx - half, cx + half});
            }
        }
        axis.budget(s, 12);
        double yb100 = axis.atExponent(2);
        s.line(left, yb100, left + mapW, yb100, "#6a1b9a", 1.5, "2,3");
        s.text(left + mapW + 4, yb100 + 4, 12, "normal", "start", "100x");
        if (!over.isEmpty()) {
            String list = "over budget: " + String.join(", ", over.size() > 8 ? over.subList(0, 8) : over) + (over.size() > 8 ? ", and " + (over.size() - 8) + " more" : "");
            s.text(left, barTop + barH + 32, 12, "normal", "start", list);
        }
        legend(s, left, legendTop, Math.min(mapW, 600));
        return s.done();
    }

    /** The heatmap's rows: every stage any layer was judged on, the eight of every layer and moe_weight first, then the rest (state stages) as first met. */
    static List<String> stageRows(List<LayerReport> reports) {
        java.util.LinkedHashSet<String> rows = new java.util.LinkedHashSet<>(Stage.NAMES);
        rows.add(Stage.MOE_WEIGHT);
        for (LayerReport rep : reports) for (StageMetric m : rep.stages()) rows.add(m.stage());
        return new ArrayList<>(rows);
    }

    /** Colour legend: the log scale with the budget line marked. */
    static void legend(Svg s, int x, int y, int w) {
        int steps = 64;
        for (int i = 0; i < steps; i++) {
            double e = LO + (HI - LO) * (i + 0.5) / steps;
            s.rect(x + w * i / (double) steps, y, w / (double) steps + 0.5, 14, colour(Math.pow(10, e)), null, null);
        }
        for (int e = (int) LO; e <= HI; e++) {
            double xx = x + w * (e - LO) / (HI - LO);
            s.line(xx, y + 14, xx, y + 18, "#555", 1, null);
            s.text(xx, y + 30, 10, "normal", "middle", e == 0 ? "1 = budget" : e == 2 ? "100x: binding error" : "1e" + e);
        }
        double xb = x + w * (0 - LO) / (HI - LO);
        s.line(xb, y - 4, xb, y + 18, "#c62828", 2.5, null);
        s.text(x, y - 8, 10, "normal", "start", "within budget (rounding)");
        s.text(x + w, y - 8, 10, "normal", "end", "over budget: drift, then binding error");
    }

    /** Green (far inside) → yellow (at the budget) → orange (drift) → red (≥ 100: binding error). */
    static String colour(double ratio) {
        if (Finding.ofRatio(ratio) == Finding.BINDING_ERROR) return "#c62828";
        double e = ratio <= 0 ? LO : Math.max(LO, Math.log10(ratio));
        if (e <= 0) {
            double t = (e - LO) / -LO; // 0 deep inside .. 1 at the budget
            return hsl(135 - 80 * t, 55 + 25 * t, 38 + 14 * t);
        }
        double t = e / 2; // 1 .. 100
        return hsl(38 - 22 * t, 90, 52 - 6 * t);
    }

    static String hsl(double h, double sat, double l) {
        return String.format(Locale.ROOT, "hsl(%.0f,%.0f%%,%.0f%%)", h, sat, l);
    }

    /**
     * Logit parity: left, engine vs reference logits (at most {@code maxPoints} points, every row's argmax
     * always included) on the diagonal; right, each position's max|diff| / max|ref| / budget with the budget line.
     */
    public static String parity(LogitParity.Result r, float[] engine, float[] reference, int maxPoints) {
        int w = 980, h = 430, pad = 50, side = 320;
        Svg s = new Svg(w, h);
        s.text(pad, 22, 15, "bold", "start", "logit parity (" + r.mode() + "): " + r.rows() + " positions x " + r.vocab() + " vocab; left: residuals, right: per position");
        double lo = Double.POSITIVE_INFINITY, hi = Double.NEGATIVE_INFINITY, dmax = 0;
        for (int i = 0; i < reference.length; i++) {
            lo = Math.min(lo, reference[i]);
            hi = Math.max(hi, reference[i]);
            double d = Math.abs((double) engine[i] - reference[i]);
            if (Double.isFinite(d)) dmax = Math.max(dmax, d);
        }
        if (!(hi > lo)) hi = lo + 1;
        // residuals: engine - reference against the reference, inside the budget band +-budget*max|ref|
        double band = r.budget() * r.maxAbsRef(), ymax = Math.max(dmax, band) * 1.15;
        if (!(ymax > 0)) ymax = 1;
        double x0 = pad + 20, y0 = 50;
        s.rect(x0, y0, side, side, "#fafafa", "#888", null);
        double yTop = y0 + side / 2.0 - band / ymax * side / 2, yBot = y0 + side / 2.0 + band / ymax * side / 2;
        s.rect(x0, yTop, side, yBot - yTop, "#e8f5e9", null, "within budget: |diff| <= budget * max|ref|");
        s.line(x0, yTop, x0 + side, yTop, "#c62828", 1.5, "6,3");
        s.line(x0, yBot, x0 + side, yBot, "#c62828", 1.5, "6,3");
        s.line(x0, y0 + side / 2.0, x0 + side, y0 + side / 2.0, "#888", 0.5, null);
        s.text(x0 + side - 4, yTop - 4, 10, "bold", "end", "budget");
        int stride = Math.max(1, reference.length / Math.max(1, maxPoints));
        for (int i = 0; i < reference.length; i += stride) dot(s, x0, y0, side, lo, hi, ymax, reference[i], engine[i], "#1565c0");
        for (LogitParity.Position p : r.positions()) {
            int j = p.position() * r.vocab() + p.referenceArgmax();
            dot(s, x0, y0, side, lo, hi, ymax, reference[j], engine[j], p.argmaxEqual() ? "#2e7d32" : "#c62828");
        }
        s.text(x0 + side / 2.0, y0 + side + 30, 11, "normal", "middle", "reference logit");
        s.text(x0 - 52, y0 + side / 2.0, 11, "normal", "middle", "engine - reference", -90);
        s.text(x0 + side / 2.0, y0 + side + 46, 10, "normal", "middle",
                String.format(Locale.ROOT, "corr %.9f, max|diff| %.3g; green = each row's reference argmax", r.correlation(), r.maxAbsDiff()));
        for (double v : new double[] {lo, (lo + hi) / 2, hi}) s.text(x0 + (v - lo) / (hi - lo) * side, y0 + side + 14, 9, "normal", "middle", fmt(v));
        for (double v : new double[] {-ymax / 1.15, 0, ymax / 1.15}) s.text(x0 - 4, y0 + side / 2.0 - v / ymax * side / 2 + 3, 9, "normal", "end", fmt(v));
        // per-position ratio to budget
        double bx = x0 + side + 90, bw = w - bx - 70, bh = side;
        s.text(bx, y0 - 10, 12, "bold", "start", "per position: max|diff| / max|ref| / budget (log)");
        double top = HI;
        for (LogitParity.Position p : r.positions()) if (Double.isFinite(p.ratioToBudget()) && p.ratioToBudget() > 0) top = Math.max(top, Math.ceil(Math.log10(p.ratioToBudget())));
        LogAxis axis = new LogAxis(bx, y0, bw, bh, LO, top); // up to the worst position: no bar cut off
        axis.draw(s, 10);
        int n = r.positions().size();
        double cw = bw / Math.max(1, n);
        for (LogitParity.Position p : r.positions()) {
            double y = axis.y(p.ratioToBudget());
            s.rect(bx + p.position() * cw + 1, y, Math.max(1, cw - 2), y0 + bh - y, colour(p.ratioToBudget()), null,
                    "position " + p.position() + ": " + fmt(p.ratioToBudget()) + "x budget, argmax " + (p.argmaxEqual() ? "equal" : "differs"));
            if (n <= 40 || p.position() % 8 == 0) s.text(bx + (p.position() + 0.5) * cw, y0 + bh + 14, 9, "normal", "middle", String.valueOf(p.position()));
            if (p.position() == r.promptLength() - 1) s.line(bx + (p.position() + 1) * cw, y0, bx + (p.position() + 1) * cw, y0 + bh, "#777", 1, "3,3");
        }
        axis.budget(s, 10);
        s.text(bx + bw / 2, y0 + bh + 30, 11, "normal", "middle", "position (dashed: end of prompt, generated span after it)");
        return s.done();
    }

    /** A vertical log axis of ratios to budget, 1e{@code lo} at the bottom to 1e{@code hi} at the top, its grid {@code w} wide. */
    private record LogAxis(double x, double top, double w, double h, double lo, double hi) {
        /** The height of 10^e. */
        double atExponent(double e) {
            return top + h * (hi - e) / (hi - lo);
        }

        /** The height of a ratio, clamped to the axis (0 and below at the bottom, non-finite at the top). */
        double y(double ratio) {
            if (!(ratio <= Double.MAX_VALUE)) return top;
            return atExponent(ratio <= 0 ? lo : Math.max(lo, Math.min(hi, Math.log10(ratio))));
        }

        /** The axis line, a grid line at every power of ten, a label at every one (every other beyond 12 decades). */
        void draw(Svg s, int labelSize) {
            s.line(x, top, x, top + h, "#555", 1, null);
            int step = hi - lo > 12 ? 2 : 1;
            for (int e = (int) lo; e <= hi; e++) {
                double y = atExponent(e);
                s.line(x - 3, y, x + w, y, "#eeeeee", 1, null);
                if ((e - (int) lo) % step == 0) s.text(x - 6, y + 4, labelSize, "normal", "end", "1e" + e);
            }
        }

        /** The dashed budget line (ratio 1), labelled at its right end. */
        void budget(Svg s, int labelSize) {
            double yb = atExponent(0);
            s.line(x, yb, x + w, yb, "#212121", 2, "6,3");
            s.text(x + w + 4, yb + 4, labelSize, "bold", "start", "budget");
        }
    }

    private static void dot(Svg s, double x0, double y0, double side, double lo, double hi, double ymax, double ref, double eng, String fill) {
        double d = eng - ref;
        if (!Double.isFinite(d)) d = ymax;
        double x = x0 + (ref - lo) / (hi - lo) * side, y = y0 + side / 2.0 - Math.max(-ymax, Math.min(ymax, d)) / ymax * side / 2;
        s.raw(String.format(Locale.ROOT, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.8\" fill=\"%s\" fill-opacity=\"0.6\"/>", x, y, fill));
    }

    static String fmt(double v) {
        return String.format(Locale.ROOT, "%.3g", v);
    }

    /** A minimal SVG builder. */
    static final class Svg {
        private final StringBuilder b = new StringBuilder();

        Svg(int w, int h) {
            b.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">%n", w, h, w, h));
            b.append(String.format(Locale.ROOT, "<rect width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>%n", w, h));
        }

        void rect(double x, double y, double w, double h, String fill, String stroke, String title) {
            b.append(String.format(Locale.ROOT, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"%s>", x, y, w, h, fill,
                    stroke == null ? "" : " stroke=\"" + stroke + "\" stroke-width=\"0.5\""));
            if (title != null) b.append("<title>").append(esc(title)).append("</title>");
            b.append("</rect>\n");
        }

        void line(double x1, double y1, double x2, double y2, String stroke, double width, String dash) {
            b.append(String.format(Locale.ROOT, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s/>%n", x1, y1, x2, y2,
                    stroke, width, dash == null ? "" : " stroke-dasharray=\"" + dash + "\""));
        }

        void text(double x, double y, int size, String weight, String anchor, String text) {
            text(x, y, size, weight, anchor, text, 0);
        }

        void text(double x, double y, int size, String weight, String anchor, String text, int rotate) {
            b.append(String.format(Locale.ROOT, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" font-weight=\"%s\" text-anchor=\"%s\"%s>%s</text>%n", x, y, size, weight,
                    anchor, rotate == 0 ? "" : String.format(Locale.ROOT, " transform=\"rotate(%d %.1f %.1f)\"", rotate, x, y), esc(text)));
        }

        void raw(String s) {
            b.append(s).append('\n');
        }

        String done() {
            return b.append("</svg>\n").toString();
        }

        static String esc(String s) {
            return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\"", "&quot;");
        }
    }
}
