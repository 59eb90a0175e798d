package k3j.cli;

import java.nio.file.Path;
import java.util.List;
import k3j.plan.AutoBudget;
import k3j.plan.MemInfo;
import k3j.plan.Preset;
import k3j.trunk.TrunkPlan;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * How much memory a run may hold its weights in: a streamed trunk and its budget, the routed-expert cache's
 * budget, or a preset of both. Declared once, mixed into every subcommand that runs the model.
 */
final class MemoryOptions {
    static final double DEFAULT_CACHE_GB = 64, DEFAULT_TRUNK_GB = 16;

    @Option(names = "--trunk", paramLabel = "DIR", description = "packed trunk directory (k3 pack-trunk): stream the layers instead of binding them resident")
    Path trunk;

    @Option(names = "--verify-trunk", paramLabel = "fast|full", description = "how --trunk's binding to the checkpoint's data is checked before "
            + "any token or verdict: fast (default: shards unchanged since the pack by file identity; the tensors of any changed shard "
            + "re-hashed) or full (every trunk tensor's data re-hashed); docs/formats.md")
    String verifyTrunk;

    @Option(names = "--trunk-gb", paramLabel = "X|auto", description = "trunk budget in GB (1e9 bytes), or auto (default 16)")
    String trunkGb;

    @Option(names = "--trunk-ring", paramLabel = "N", description = "ring slots wanted, 1..8 (0 means 2; default 2)")
    Integer trunkRing;

    @Option(names = "--cache-gb", paramLabel = "X", description = "routed-expert cache budget in GB (1e9 bytes). Given (or --trunk): experts are "
            + "served by the cache; absent: resident when all experts fit in 64 GB, else a 64 GB cache")
    Double cacheGb;

    @Option(names = "--preset", paramLabel = "NAME", description = "ultra/laptop/desktop/workstation/server/max/auto: trunk and cache budgets "
            + "(flags after it override it; needs --trunk)")
    String preset;

    @CommandLine.Mixin
    ListPresetsOption listPresets;

    @Spec(Spec.Target.MIXEE)
    CommandSpec mixee;

    /** Budgets after the preset and the flags, applied in argv order. */
    record Budgets(String presetName, double trunkGb, double cacheGb, boolean cacheGiven, boolean ultra) {
        long trunkBytes() {
            return Math.round(trunkGb * 1e9);
        }

        long cacheBytes() {
            return Math.round(cacheGb * 1e9);
        }
    }

    /** Whether any memory flag was given. */
    boolean given() {
        return trunk != null || trunkGb != null || trunkRing != null || cacheGb != null || preset != null || verifyTrunk != null;
    }

    boolean streamed() {
        return trunk != null;
    }

    /** The data binding check --verify-trunk asks for (fast by default). */
    k3j.trunk.DataBinding.Check verifyTrunk() {
        if (verifyTrunk == null || verifyTrunk.equals("fast")) return k3j.trunk.DataBinding.Check.FAST;
        if (verifyTrunk.equals("full")) return k3j.trunk.DataBinding.Check.FULL;
        throw usage("--verify-trunk must be fast or full, got '" + verifyTrunk + "'");
    }

    /** The largest budget a flag may state (1 PB): past it the byte counts overflow a long (1e308 printed a negative TOTAL). */
    static final double MAX_GB = 1e6;

    /** Ring slots wanted (0 means 2). */
    int ring() {
        return trunkRing == null ? 2 : trunkRing;
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(mixee.commandLine(), msg);
    }

    /** The flags alone, before anything is read. */
    void validate() {
        if (cacheGb != null && !(cacheGb > 0 && cacheGb <= MAX_GB)) throw usage("--cache-gb must be a positive number of GB up to " + MAX_GB + ", got " + cacheGb);
        if (trunkGb != null && !trunkGb.equals("auto")) {
            try {
                double t = Double.parseDouble(trunkGb);
                if (!(t > 0 && t <= MAX_GB)) throw usage("--trunk-gb must be a positive number of GB up to " + MAX_GB + ", got " + trunkGb);
            } catch (NumberFormatException e) {
                throw usage("--trunk-gb must be a number of GB or auto, got '" + trunkGb + "'");
            }
        }
        if (trunkRing != null && (trunkRing < 0 || trunkRing > TrunkPlan.MAX_RING)) throw usage("--trunk-ring must be 0..8, got " + trunkRing);
        verifyTrunk();
        if (verifyTrunk != null && trunk == null) throw usage("--verify-trunk checks a --trunk <packed_dir>: give one");
        if (trunk != null && !java.nio.file.Files.isDirectory(trunk)) {
            throw usage("--trunk: " + (java.nio.file.Files.exists(trunk) ? "not a folder: " : "no such folder: ") + trunk);
        }
        if (trunk == null && (trunkGb != null || trunkRing != null || preset != null)) {
            throw usage((preset != null ? "--preset" : trunkGb != null ? "--trunk-gb" : "--trunk-ring") + " needs --trunk <packed_dir> (presets stream the trunk)");
        }
    }

    /** The preset (auto: measured from {@code mem}, its line given to {@code autoLine}), then --trunk-gb / --cache-gb, later wins. */
    Budgets budgets(MemInfo mem, java.util.function.Consumer<String> autoLine) {
        validate();
        Preset named = null;
        if (preset != null && !preset.equals(Preset.AUTO)) {
            try {
                named = Preset.parse(preset);
            } catch (IllegalArgumentException e) {
                throw usage(e.getMessage().strip());
            }
        }
        Double trunkGbFlag = null;
        if (trunkGb != null && !trunkGb.equals("auto")) {
            try {
                trunkGbFlag = Double.parseDouble(trunkGb);
            } catch (NumberFormatException e) {
                throw usage("--trunk-gb must be a number of GB or auto, got '" + trunkGb + "'");
            }
            if (!(trunkGbFlag > 0)) throw usage("--trunk-gb must be positive, got " + trunkGb);
        }
        AutoBudget auto = null;
        if (Preset.AUTO.equals(preset) || "auto".equals(trunkGb)) {
            try {
                auto = AutoBudget.of(mem);
            } catch (IllegalStateException e) {
                throw usage(e.getMessage());
            }
            autoLine.accept(auto.line());
        }
        List<String> argv = mixee.commandLine().getParseResult() == null ? List.of() : mixee.commandLine().getParseResult().originalArgs();
        int presetAt = lastIndex(argv, "--preset"), trunkAt = lastIndex(argv, "--trunk-gb"), cacheAt = lastIndex(argv, "--cache-gb");
        boolean autoPreset = Preset.AUTO.equals(preset);
        Double presetTrunk = null, presetCache = null, flagTrunk = trunkGbFlag;   // no ternaries: a null Double must not unbox
        if (named != null) {
            presetTrunk = named.trunkGb();
            presetCache = named.cacheGb();
        } else if (autoPreset) {
            presetTrunk = auto.trunkGb();
            presetCache = auto.cacheGb();
        }
        if ("auto".equals(trunkGb)) flagTrunk = auto.trunkGb();
        double t = pick(presetTrunk, presetAt, flagTrunk, trunkAt, DEFAULT_TRUNK_GB);
        double c = pick(presetCache, presetAt, cacheGb, cacheAt, DEFAULT_CACHE_GB);
        String name = named != null ? named.id() : autoPreset ? Preset.AUTO : null;
        return new Budgets(name, t, c, presetCache != null || cacheGb != null, named != null && named.ultra());
    }

    /** The plan of these flags under {@code b}. */
    k3j.api.Plan plan(Budgets b) {
        return new k3j.api.Plan(trunk, b.trunkGb(), b.cacheGb(), b.cacheGiven(), b.ultra(), ring(), b.presetName(), k3j.api.TrunkCheck.valueOf(verifyTrunk().name()));
    }

    private static double pick(Double fromPreset, int presetAt, Double fromFlag, int flagAt, double dflt) {
        if (fromPreset != null && fromFlag != null) return presetAt > flagAt ? fromPreset : fromFlag;
        return fromFlag != null ? fromFlag : fromPreset != null ? fromPreset : dflt;
    }

    private static int lastIndex(List<String> argv, String name) {
        int at = -1;
        for (int i = 0; i < argv.size(); i++) if (argv.get(i).equals(name) || argv.get(i).startsWith(name + "=")) at = i;
        return at;
    }
}
