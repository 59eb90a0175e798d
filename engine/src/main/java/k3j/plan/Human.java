package k3j.plan;

import java.util.Locale;

/** Byte counts for people: divide by 1000 until under 1000, units B, KB, MB, GB, TB, {@code %.2f %s} (whole bytes: {@code %.0f B}; docs/semantics.md §7.4). */
public final class Human {
    private static final String[] UNITS = {"B", "KB", "MB", "GB", "TB"};

    private Human() {}

    public static String bytes(double b) {
        int u = 0;
        while (Math.abs(b) >= 1000 && u < UNITS.length - 1) {
            b /= 1000;
            u++;
        }
        return u == 0 ? String.format(Locale.ROOT, "%.0f B", b) : String.format(Locale.ROOT, "%.2f %s", b, UNITS[u]);
    }

    /** Seconds for people: s, ms or µs, {@code %.2f}. */
    public static String seconds(double s) {
        double a = Math.abs(s);
        if (a >= 1 || a == 0) return String.format(Locale.ROOT, "%.2f s", s);
        if (a >= 1e-3) return String.format(Locale.ROOT, "%.2f ms", s * 1e3);
        return String.format(Locale.ROOT, "%.2f µs", s * 1e6);
    }
}
