package k3j.probe;

import java.util.Locale;
import k3j.provider.ProviderGrade;

/**
 * Where two answers that must agree first part: the two requests, the completion token (and its position in the
 * sequence), what differs there and by how much. Agreement is equal bits (the logprobs as the server printed them),
 * or, for a server declared non-deterministic, the same ids and every logprob within {@code budget} nats.
 *
 * @param first    the request taken as the standard
 * @param second   the request that parts from it
 * @param token    the completion token of {@code second} where they part (0-based)
 * @param position its position in the sequence (prompt ids before it)
 * @param what     what differs
 * @param by       how much (nats; NaN when the ids differ or an answer ends)
 */
public record Divergence(String first, String second, int token, int position, String what, double by) {

    /** One line: "X parts from Y at completion token T (position P): what, by D". */
    public String text() {
        return String.format(Locale.ROOT, "\"%s\" parts from \"%s\" at completion token %d (position %d): %s%s", second, first, token, position, what,
                Double.isNaN(by) ? "" : String.format(Locale.ROOT, ", by %.3g nats", by));
    }

    /**
     * The first place where {@code n} tokens of {@code b} from its token {@code bFrom} part from {@code a}'s from
     * {@code aFrom} (null: they agree). Fewer than {@code n} tokens on either side parts where the shorter ends.
     */
    static Divergence first(Answer a, int aFrom, Answer b, int bFrom, int n, double budget) {
        ProviderGrade.Ids x = a.ids(), y = b.ids();
        for (int k = 0; k < n; k++) {
            int i = aFrom + k, j = bFrom + k, pos = b.prompt().length + j;
            if (i >= x.size() || j >= y.size()) {
                return new Divergence(a.request(), b.request(), j, pos, (i >= x.size() ? "\"" + a.request() + "\"" : "\"" + b.request() + "\"")
                        + " ends there (" + x.size() + " and " + y.size() + " completion tokens)", Double.NaN);
            }
            if (x.chosen()[i] != y.chosen()[j]) {
                return new Divergence(a.request(), b.request(), j, pos, "id " + y.chosen()[j] + " where the other chose " + x.chosen()[i], Double.NaN);
            }
            int[] ta = x.top()[i], tb = y.top()[j];
            double[] la = x.topLogprob()[i], lb = y.topLogprob()[j];
            double chosenA = a.response().tokens().get(i).chosen().logprob(), chosenB = b.response().tokens().get(j).chosen().logprob();
            if (!same(chosenA, chosenB, budget)) {
                return new Divergence(a.request(), b.request(), j, pos, String.format(Locale.ROOT, "logprob of id %d %s against %s", y.chosen()[j],
                        show(chosenB), show(chosenA)), Math.abs(chosenA - chosenB));
            }
            if (ta.length != tb.length) {
                return new Divergence(a.request(), b.request(), j, pos, tb.length + " alternatives where the other lists " + ta.length, Double.NaN);
            }
            for (int t = 0; t < ta.length; t++) {
                if (ta[t] != tb[t]) {
                    return new Divergence(a.request(), b.request(), j, pos, "alternative " + t + " is id " + tb[t] + " where the other lists id " + ta[t],
                            Math.abs(la[t] - lb[t]));
                }
                if (!same(la[t], lb[t], budget)) {
                    return new Divergence(a.request(), b.request(), j, pos, String.format(Locale.ROOT, "alternative %d (id %d) logprob %s against %s", t, tb[t],
                            show(lb[t]), show(la[t])), Math.abs(la[t] - lb[t]));
                }
            }
        }
        return null;
    }

    private static boolean same(double a, double b, double budget) {
        return budget == 0 ? Double.doubleToLongBits(a) == Double.doubleToLongBits(b) : Math.abs(a - b) <= budget;
    }

    private static String show(double x) {
        return Double.toString(x);
    }
}
