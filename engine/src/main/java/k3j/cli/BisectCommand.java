package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.bisect.Bisect;
import k3j.bisect.BisectException;
import k3j.bisect.Candidate;
import k3j.bisect.LayerConformance;
import k3j.bisect.LayerRunner;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.ExpertLayerReport;
import k3j.conform.LayerReport;
import k3j.conform.LayerSelection;
import k3j.config.ConfigException;
import k3j.io.CheckpointException;
import k3j.kernels.Workers;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 bisect MODEL --reference DUMP}: runs the selected layers alone from the dump's inputs (k3j.conform),
 * names the first layer and stage over budget and diagnoses it: which mix-up of that layer's weights (a
 * same-shape swap, a stored transpose, an expert's nibble order, two experts swapped) makes the stage pass,
 * or that none does. The dump is checked against the model's shard headers (sizes, header sha256, config),
 * as {@code k3 conform} does: a dump of other weights is refused; a copy whose DATA differs (a bad
 * conversion, a corrupted download) still matches, and that difference is what bisect finds.
 */
@Command(name = "bisect", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = {"Per-layer conformance against a reference dump; names and diagnoses the first failing layer and stage.",
                "With --experts, when every layer conforms, a failing expert is the failing stage and is diagnosed."},
        footer = "Exit codes: 0 every layer conforms, 1 a layer fails (or the model/dump cannot be read or do not match), 2 bad arguments.")
final class BisectCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @CommandLine.Mixin
    ThreadsOption threads;

    @CommandLine.Mixin
    MemoryOptions memory;

    @CommandLine.ArgGroup(exclusive = false, multiplicity = "1")
    ReferenceOption reference;

    @CommandLine.Mixin
    LayerScope scope;

    @Option(names = "--budget", paramLabel = "N|TIME", description = "the most candidates to re-run (200) or the longest to search (90s, 10m, 1h); "
            + "default " + k3j.bisect.SearchBudget.DEFAULT_CANDIDATES + " candidates. Candidates run best-fitting first; the rest are listed as not tried")
    String budget;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        Path model = modelFolder.config().getParent();
        Path dump = reference.dump;
        if (!Files.exists(dump)) throw usage("no such reference dump: " + dump);
        int workers = threads.count();
        k3j.bisect.SearchBudget searchBudget;
        try {
            searchBudget = budget == null ? k3j.bisect.SearchBudget.DEFAULT : k3j.bisect.SearchBudget.parse(budget);
        } catch (IllegalArgumentException e) {
            throw usage(e.getMessage());
        }
        memory.validate();
        scope.check(modelFolder.config());
        long t0 = System.nanoTime();
        PlannedConformance planned;
        try (Workers w = Workers.of(workers);
             Conformance c = (planned = new PlannedConformance(memory, model, k3j.conform.ReferenceMatch.locate(model, dump, List.of()), w, false, out, err)).conformance) {
            List<Integer> sel = scope.select(c.layerCount());
            if (c.model() == null) {
                err.println("k3 bisect: " + c.bindFailure().getMessage());
                return ExitCode.RUNTIME;
            }
            out.printf(Locale.ROOT, "bisect: %s against %s (%d ids), layers %s%n", model, c.dump().source(), c.tokens(), LayerSelection.format(sel));
            out.println("budget: " + c.budget().rule());
            Bisect.Report r;
            try (LayerRunner runner = LayerRunner.of(c, w)) {
                r = Bisect.run(new LayerConformance(c), runner, sel, scope.experts, searchBudget);
            }
            for (LayerReport l : r.layers()) if (!l.conforms()) out.println(l.line());
            out.printf(Locale.ROOT, "%d of %d layers conform%n", r.layers().size() - r.failing().size(), r.layers().size());
            Bisect.Diagnosis d = r.diagnosis();
            if (d != null) {
                out.printf(Locale.ROOT, "diagnosis of L%d %s: %d candidates re-run in %.0f ms (budget %s, best-fitting first)%n", d.layer(), d.stage().key, d.tried(),
                        d.nanos() / 1e6, d.budget().describe());
                out.println("  " + d.notTried());
                if (d.explained()) for (Bisect.Explanation e : d.explanations()) out.println("  L" + d.layer() + ": " + e.describe());
                else out.println("  L" + d.layer() + ": nothing explains it");
            }
            for (ExpertLayerReport l : r.experts()) if (!l.conforms()) out.println(l.line());
            if (scope.experts) out.printf(Locale.ROOT, "%d of %d MoE layers' experts conform%n", r.experts().size() - r.failingExperts().size(), r.experts().size());
            Bisect.ExpertDiagnosis ed = r.expertDiagnosis();
            if (ed != null) {
                out.printf(Locale.ROOT, "diagnosis of L%d expert %d: %d candidates re-run in %.0f ms%n", ed.layer(), ed.expert(), ed.tried(), ed.nanos() / 1e6);
                if (ed.explained()) for (Candidate e : ed.explanations()) out.println("  L" + ed.layer() + ": " + e.describe());
                else out.println("  L" + ed.layer() + " expert " + ed.expert() + ": nothing explains it");
            }
            planned.report(out);
            out.printf(Locale.ROOT, "VERDICT: %s (%.1f s)%n", r.summary(), (System.nanoTime() - t0) / 1e9);
            return r.failing().isEmpty() && r.failingExperts().isEmpty() ? ExitCode.OK : ExitCode.RUNTIME;
        } catch (k3j.plan.PlanRefused e) {
            err.println(e.getMessage());
            return e.refusal().exitCode();
        } catch (ConformException | BisectException | CheckpointException | ConfigException | k3j.trunk.TrunkException | k3j.model.ForwardException e) {
            err.println("k3 bisect: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }
}
