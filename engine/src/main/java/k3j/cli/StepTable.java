package k3j.cli;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * The STEP table (docs/semantics.md §7.5), one row per generation step, with the columns this engine adds: tokens fed
 * to the forward that step (incremental: the prompt, then 1; full recompute: the whole sequence), ms per
 * token fed, and the step's I/O share (trunk read time + expert read time over the step's wall time; above
 * 100% when reads overlapped compute on the reader threads). READ is the expert cache's (trunk bytes are
 * in the trunk block). CACHE HIT has two decimals, as the cache report's hit rate.
 */
final class StepTable {
    record Row(int step, int token, int fed, double seconds, double cacheHitPct, long expertBytes, double ioSeconds) {}

    static final String HEADER = String.format(Locale.ROOT, "%-6s %-10s %-7s %-12s %-10s %-10s %-10s %-8s %s",
            "STEP", "TOKEN", "FED", "SECONDS", "MS/TOKEN", "CACHE HIT", "READ", "I/O %", "TOK/S");
    static final String RULE = "-".repeat(86);

    private final List<Row> rows = new ArrayList<>();

    String add(Row r) {
        rows.add(r);
        return String.format(Locale.ROOT, "%-6d %-10d %-7d %-12.3f %-10.2f %-10.2f %-10s %-8.1f %.3f", r.step, r.token, r.fed, r.seconds,
                1e3 * r.seconds / r.fed, r.cacheHitPct, k3j.plan.Human.bytes(r.expertBytes), r.seconds > 0 ? 100 * r.ioSeconds / r.seconds : 0.0,
                r.seconds > 0 ? 1 / r.seconds : 0.0);
    }

    List<Row> rows() {
        return List.copyOf(rows);
    }

    double seconds() {
        return rows.stream().mapToDouble(Row::seconds).sum();
    }

    String footer() {
        double s = seconds();
        return RULE + System.lineSeparator() + String.format(Locale.ROOT, "%d tokens in %.1f s, %.2f s/token average", rows.size(), s,
                rows.isEmpty() ? 0.0 : s / rows.size());
    }
}
