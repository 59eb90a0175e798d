package k3j.plan;

import java.util.Locale;

/**
 * The named budgets of {@code --preset} (docs/semantics.md §7.2), in {@code --list-presets} order. Budgets are in
 * GB of 1e9 bytes. {@code auto} is not a row here: {@link AutoBudget} computes it from this machine.
 */
public enum Preset {
    // each note's figure is the plan TOTAL of the released model under the budgets (MemoryPlanTest computes it), not a measurement
    ULTRA(2.50, 0.31, true, "at most 3.0 GB planned for the released model: streamed model tables, one state slot. Slow."),
    LAPTOP(3.00, 1.00, false, "at most 9.4 GB planned for the released model. The ordinary-path floor."),
    DESKTOP(16.00, 10.00, false, "at most 31.4 GB planned for the released model."),
    WORKSTATION(60.00, 30.00, false, "at most 95.4 GB planned for the released model; the expert cache starts to matter here."),
    SERVER(110.00, 13.00, false, "at most 128.4 GB planned for the released model; 90 of 93 trunk layers pinned. Fastest."),
    MAX(110.00, 109.00, false, "at most 224.4 GB planned for the released model; trunk pinned and a large expert cache.");

    public static final String AUTO = "auto";
    static final String AUTO_NOTE = "sizes both from this machine's free RAM, trunk-first. Recommended.";

    private final double trunkGb;
    private final double cacheGb;
    private final boolean ultra;
    private final String note;

    Preset(double trunkGb, double cacheGb, boolean ultra, String note) {
        this.trunkGb = trunkGb;
        this.cacheGb = cacheGb;
        this.ultra = ultra;
        this.note = note;
    }

    public double trunkGb() {
        return trunkGb;
    }

    public double cacheGb() {
        return cacheGb;
    }

    /** Whether the preset also selects ultra-low-memory mode. */
    public boolean ultra() {
        return ultra;
    }

    public String note() {
        return note;
    }

    /** The lower-case name used on the command line. */
    public String id() {
        return name().toLowerCase(Locale.ROOT);
    }

    /** The preset named {@code name} (exact, lower case); anything else is an {@link IllegalArgumentException} with the table. */
    public static Preset parse(String name) {
        for (Preset p : values()) if (p.id().equals(name)) return p;
        throw new IllegalArgumentException("unknown preset '" + name + "'\n" + table());
    }

    /** The {@code --list-presets} output (docs/semantics.md §7.2), ending in a newline. */
    public static String table() {
        StringBuilder b = new StringBuilder("presets (trunk / expert-cache, in GB):\n");
        for (Preset p : values()) {
            b.append(String.format(Locale.ROOT, "  %-12s %6.2f / %-6.2f  %s%n", p.id(), p.trunkGb, p.cacheGb, p.note));
        }
        b.append(String.format(Locale.ROOT, "  %-12s %6s / %-6s  %s%n", AUTO, "fit", "fit", AUTO_NOTE));
        b.append("\nThe figures are plans (5 prompt ids, the JVM at 100 MB); a run prints its own plan first and its PEAK RSS at the end.\n");
        b.append("All presets stream the trunk, so they need --trunk <packed_dir>.\n");
        b.append("Run k3 doctor to see which one this machine fits.\n");
        return b.toString();
    }

    /** k3-doctor's recommendation by MemAvailable in whole GiB: server, workstation, desktop, laptop, or none. */
    public static Recommendation recommend(long availableBytes) {
        long gib = availableBytes >> 30;
        if (gib >= 192) return new Recommendation(SERVER, "~6 s/token");
        if (gib >= 96) return new Recommendation(WORKSTATION, "~6-20 s/token");
        if (gib >= 32) return new Recommendation(DESKTOP, "~24 s/token");
        if (gib >= 10) return new Recommendation(LAPTOP, "~27 s/token");
        return new Recommendation(null, "under 10 GiB available: only ultra (slow), if at all");
    }

    /** A preset (null: none fits) and the speed the README measured for it. */
    public record Recommendation(Preset preset, String expect) {}
}
