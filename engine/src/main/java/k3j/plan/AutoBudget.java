package k3j.plan;

import java.util.Locale;

/**
 * {@code --preset auto} / {@code --trunk-gb auto} (docs/semantics.md §7.2): sizes the trunk and the expert cache from
 * MemAvailable, trunk first. GB = 1e9 bytes. reserve = 2.0 + 0.02·avail + 4.70 (embed + lm_head) + 1.70;
 * usable = avail − reserve; under 3 GB usable is refused (exit 2). With room for the whole trunk (111 GB)
 * the rest goes to the cache; otherwise the trunk is capped below 55% of MemTotal (a partial pin near the
 * RAM ceiling measured slower) and the cache gets 0.5 GB.
 */
public record AutoBudget(double availableGb, double reserveGb, double trunkGb, double cacheGb) {

    public static AutoBudget of(MemInfo mem) {
        if (mem.availableBytes().isEmpty()) {
            throw new IllegalStateException("--preset auto needs MemAvailable, which this system does not report; give --trunk-gb and --cache-gb");
        }
        double avail = mem.availableBytes().getAsLong() / 1e9;
        double reserve = 2.0 + 0.02 * avail + 4.70 + 1.70;
        double usable = avail - reserve;
        if (usable < 3.0) {
            throw new IllegalStateException(String.format(Locale.ROOT,
                    "auto budget: %.1f GB available leaves %.1f GB after the %.1f GB reserve; at least 3.0 GB is needed", avail, usable, reserve));
        }
        if (usable - 0.5 >= 111) return new AutoBudget(avail, reserve, 111, usable - 111);
        double ceiling = mem.totalBytes().isPresent() ? 0.55 * mem.totalBytes().getAsLong() / 1e9 : usable;
        double cap = Math.max(2.5, ceiling - reserve - 0.5);
        return new AutoBudget(avail, reserve, Math.min(usable - 0.5, cap), 0.5);
    }

    public String line() {
        return String.format(Locale.ROOT, "auto budget: %.1f GB available, %.1f GB reserved -> trunk %.1f GB / expert cache %.1f GB",
                availableGb, reserveGb, trunkGb, cacheGb);
    }
}
