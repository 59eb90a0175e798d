package k3j.probe;

import java.util.Locale;
import k3j.verdict.Invariants;

/** The probe's first screen: every case on one line, the first divergence, the verdict (the decision's own line). */
public final class Screen {
    private Screen() {}

    /** The cases, the first divergence and the verdict block. */
    public static String text(Probe.Result r) {
        StringBuilder sb = new StringBuilder();
        for (Probe.Case c : r.cases()) {
            Invariants.Item i = c.item();
            String mark = switch (i.status()) {
                case PASS -> "PASS      ";
                case FAIL -> "FAIL      ";
                case NOT_JUDGED -> "NOT JUDGED";
                case REFUSED -> "REFUSED   ";
            };
            sb.append(mark).append("  ").append(c.kind() == Probe.Kind.PROPERTY ? "property: " : "").append(c.name());
            if (!i.why().isEmpty()) sb.append("\n            ").append(i.why());
            sb.append('\n');
        }
        for (String l : r.leftOut()) sb.append("left out    property: ").append(l).append('\n');
        sb.append(String.format(Locale.ROOT, "requests    : %d sent (%d of them retries after 429/503)%n", r.requests(), r.retried()));
        Probe.Case first = r.firstDivergence();
        if (first != null) {
            sb.append("FIRST DIVERGENCE: ").append(first.kind() == Probe.Kind.PROPERTY ? "property " : "").append(first.name());
            sb.append(first.item().why().isEmpty() ? "" : ": " + first.item().why()).append('\n');
        }
        sb.append(r.verdict().text());
        return sb.toString();
    }
}
