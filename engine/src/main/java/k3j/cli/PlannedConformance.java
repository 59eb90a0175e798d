package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import k3j.api.Conform;
import k3j.api.internal.ApiInternals;
import k3j.compare.Conformance;
import k3j.dump.ReferenceDump;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;

/**
 * A conformance opened under the memory plan of the {@link MemoryOptions} flags ({@link Conform#model}): the
 * budgets (a preset, --trunk-gb, --cache-gb), the plan block printed from the model's own sizes, a refusal
 * ({@link k3j.plan.PlanRefused}) when it does not fit, then the trunk streamed and the routed experts served by
 * the expert cache. {@code k3 conform} and {@code k3 bisect} share it.
 */
final class PlannedConformance {
    final Conform conform;
    final Conformance conformance;

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
        Conform.Options o = Conform.Options.DEFAULTS.withLogits(incremental).withMemory(new k3j.api.MachineMemory(mem.totalBytes(), mem.availableBytes()))
                .withReport(s -> {
                    out.print(s);
                    out.flush();
                }, err::println);
        this.conform = ApiInternals.get().conform(model, dump, memory.plan(budgets), o, a -> bisect ? k3j.bisect.LayerRunner.scratchBytes(a.binding()) : 0L, workers);
        this.conformance = ApiInternals.get().conformance(conform);
    }

    MemoryPlan plan() {
        return ApiInternals.get().plan(conform);
    }

    Assembly assembly() {
        return ApiInternals.get().assembly(conform);
    }

    /** The end-of-run lines: the expert cache's counters (when the experts went through it) and the peak RSS against the plan's TOTAL. */
    void report(PrintWriter out) {
        ConformCommand.report(out, conform);
    }
}
