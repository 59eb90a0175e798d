package k3j.plan;

import java.util.Locale;

/** Byte counts for people: divide by 1000 until under 1000, units B, KB, MB, GB, TB, {@code %.2f %s} (docs/semantics.md §7.4). */
public final class Human {
    private static final String[] UNITS = {"B", "KB", "MB", "GB", "TB"};

    private Human() {}

    public static String bytes(double b) {
        int u = 0;
        while (Math.abs(b) >= 1000 && u < UNITS.length - 1) {
            b /= 1000;
            u++;
        }
        return String.format(Locale.ROOT, "%.2f %s", b, UNITS[u]);
    }
}
