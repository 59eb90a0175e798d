package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;
import k3j.conform.Conformance;
import k3j.conform.ReferenceDump;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.Residency;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;

/**
 * A conformance opened under the memory plan of the {@link MemoryOptions} flags, as {@code k3 run} opens a run:
 * the budgets (a preset, --trunk-gb, --cache-gb), the plan block printed from the model's own sizes, a refusal
 * ({@link k3j.plan.PlanRefused}) when it does not fit, then the trunk streamed and the routed experts served by
 * the expert cache. {@code k3 conform} and {@code k3 bisect} share it.
 */
final class PlannedConformance {
    final Conformance conformance;
    /** The plan the conformance was opened under, and what it opened (the cache's counters); null when the model did not bind. */
    MemoryPlan plan;
    Assembly assembly;

    /**
     * @param incremental whether the KV cache of an incremental forward over the dump's ids is planned (logit parity)
     */
    PlannedConformance(MemoryOptions memory, Path model, ReferenceDump dump, Workers workers, boolean incremental, PrintWriter out, PrintWriter err) {
        this(memory, model, dump, workers, incremental, false, out, err);
    }

    /** @param bisect whether the plan counts what a bisect candidate adds ({@link k3j.bisect.LayerRunner#scratchBytes}) */
    PlannedConformance(MemoryOptions memory, Path model, ReferenceDump dump, Workers workers, boolean incremental, boolean bisect, PrintWriter out, PrintWriter err) {
        MemInfo mem = RunCommand.memInfo();
        MemoryOptions.Budgets budgets = memory.budgets(mem, out::println);
        if (budgets.presetName() != null) {
            out.printf(Locale.ROOT, "preset    : %s (trunk %.2f GB / expert cache %.2f GB)%n", budgets.presetName(), budgets.trunkGb(), budgets.cacheGb());
        }
        Residency r = memory.residency(budgets, true, s -> err.println("k3: note: " + s));
        this.conformance = Conformance.open(model, dump, workers, r.planned(mem, dump.ids().length, incremental, a -> bisect ? k3j.bisect.LayerRunner.scratchBytes(a.binding()) : 0L, p -> {
            if (plan == null) plan = p;
            out.print(p.block(mem));
            out.flush();
        }, a -> {
            if (assembly == null) assembly = a;
            out.print(Residency.describe(a));
            out.flush();
        }, err::println));
    }

    /** The end-of-run lines: the expert cache's counters (when the experts went through it) and the peak RSS against the plan's TOTAL. */
    void report(PrintWriter out) {
        if (assembly != null && assembly.cache() != null) {
            var s = assembly.cache().totalStats();
            out.printf(Locale.ROOT, "expert cache: %d requests, %d hits, %d misses, %d evictions, %s read%n", s.requests(), s.hits(), s.misses(), s.evictions(),
                    k3j.plan.Human.bytes(s.bytesRead()));
        }
        MemInfo.peakRss().ifPresent(p -> out.println("PEAK RSS for the whole run: " + k3j.plan.Human.bytes(p)
                + (plan != null ? " (plan TOTAL " + k3j.plan.Human.bytes(plan.total()) + ")" : "")));
    }
}
