package k3j.bisect;

import java.time.Duration;
import java.util.Locale;

/**
 * How much a diagnosis may try: at most {@code candidates} layer re-runs, or until {@code time} has passed,
 * whichever is given ({@code k3 bisect --budget 200} or {@code --budget 90s / 10m / 1h}). A search at the
 * released width can have tens of thousands of candidates (every pair of experts with one routed), each a
 * full layer re-run; the budget bounds it and the diagnosis names what it did not try.
 *
 * @param candidates the most candidates to re-run (0: no count limit)
 * @param time       the longest the search may run (null: no time limit)
 */
public record SearchBudget(int candidates, Duration time) {
    /** The default: {@value #DEFAULT_CANDIDATES} candidates (every candidate of a small checkpoint; the best-fitting ones at the released width). */
    public static final int DEFAULT_CANDIDATES = 1000;
    public static final SearchBudget DEFAULT = new SearchBudget(DEFAULT_CANDIDATES, null);

    public SearchBudget {
        if (candidates < 0) throw new IllegalArgumentException("a candidate budget must be positive, got " + candidates);
        if (candidates == 0 && time == null) throw new IllegalArgumentException("a budget needs a count or a time");
    }

    /** "200" (candidates) or "90s", "10m", "1h" (time). */
    public static SearchBudget parse(String s) {
        String v = s.trim().toLowerCase(Locale.ROOT);
        try {
            if (v.matches("\\d+")) {
                int n = Integer.parseInt(v);
                if (n < 1) throw new IllegalArgumentException("--budget must be at least 1 candidate, got " + s);
                return new SearchBudget(n, null);
            }
            if (v.matches("\\d+(\\.\\d+)?[smh]")) {
                double x = Double.parseDouble(v.substring(0, v.length() - 1));
                double secs = x * switch (v.charAt(v.length() - 1)) {
                    case 's' -> 1;
                    case 'm' -> 60;
                    default -> 3600;
                };
                if (!(secs > 0)) throw new IllegalArgumentException("--budget time must be positive, got " + s);
                return new SearchBudget(0, Duration.ofMillis(Math.round(secs * 1000)));
            }
        } catch (NumberFormatException e) {
            // fall through to the message below
        }
        throw new IllegalArgumentException("--budget must be a candidate count (200) or a time (90s, 10m, 1h), got '" + s + "'");
    }

    /** Whether the search must stop before trying one more, after {@code tried} candidates in {@code nanos}. */
    public boolean exhausted(int tried, long nanos) {
        return candidates > 0 && tried >= candidates || time != null && nanos >= time.toNanos();
    }

    /**
     * One failing layer's share of this budget, fair across the layers still to diagnose: what is left after
     * {@code tried} candidates in {@code nanos}, divided by {@code layersLeft} (a layer that stops early leaves the
     * rest to the layers after it).
     */
    public Share share(int tried, long nanos, int layersLeft) {
        int n = Math.max(1, layersLeft);
        int c = candidates > 0 ? Math.max(0, (candidates - tried + n - 1) / n) : -1;
        long t = time != null ? Math.max(0, (time.toNanos() - nanos) / n) : -1;
        return new Share(this, c, t);
    }

    /** The whole budget as one layer's share. */
    public Share whole() {
        return share(0, 0, 1);
    }

    /** A layer's share: at most {@code candidates} (−1: no count limit) in {@code nanos} (−1: no time limit). */
    public record Share(SearchBudget of, int candidates, long nanos) {
        public boolean exhausted(int tried, long elapsed) {
            return candidates >= 0 && tried >= candidates || nanos >= 0 && elapsed >= nanos;
        }

        /** "334 of 1000 candidates", "30 s of 90 s", or the whole budget's own description. */
        public String describe() {
            String whole = of.describe();
            String mine = candidates >= 0 ? candidates + " candidates" : String.format(Locale.ROOT, "%.0f s", nanos / 1e9);
            return mine.equals(whole) ? whole : mine + " of " + whole;
        }
    }

    public String describe() {
        return candidates > 0 ? candidates + " candidates" : String.format(Locale.ROOT, "%.0f s", time.toMillis() / 1000.0);
    }
}
