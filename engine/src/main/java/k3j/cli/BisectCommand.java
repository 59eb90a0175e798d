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
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.config.ConfigException;
import k3j.io.CheckpointException;
import k3j.kernels.Workers;
import k3j.verdict.ConformException;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 bisect MODEL [--reference DUMP]}: runs the selected layers alone from the dump's inputs (k3j.compare),
 * names every layer and stage over budget and diagnoses each in layer order under one shared budget: which
 * mix-up of that layer's weights (a same-shape swap, a stored transpose, an expert's nibble order, two experts
 * swapped) makes the stage pass, or that none does. The dump is found as {@code k3 conform} finds it, and the
 * memory plan is conform's plus what a candidate adds. The dump is checked against the model's shard headers (sizes, header sha256, config),
 * as {@code k3 conform} does: a dump of other weights is refused; a copy whose DATA differs (a bad
 * conversion, a corrupted download) still matches, and that difference is what bisect finds.
 */
@Command(name = "bisect", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = {"Per-layer conformance against a reference dump; names and diagnoses every failing layer and stage.",
                "With --experts, when every layer conforms, a failing expert is the failing stage and is diagnosed."},
        footer = {"The dump defaults to the one whose manifest matches the model's shards, searched as k3 conform searches.",
                "Exit codes, the verdict's own: 0 CONFORMS, 1 DOES NOT CONFORM (or the model/dump cannot be read or do not match), 2 bad arguments, 3 INCOMPLETE."})
final class BisectCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @CommandLine.Mixin
    ThreadsOption threads;

    @CommandLine.Mixin
    MemoryOptions memory;

    @CommandLine.ArgGroup(exclusive = false)
    ReferenceOption reference;

    @Option(names = "--dumps", paramLabel = "DIR", description = "another folder to search for the matching dump (repeatable)")
    List<Path> dumps = new java.util.ArrayList<>();

    @Option(names = "--json", paramLabel = "FILE", description = "write every failing layer's diagnosis (evidence, family order, candidates tried, "
            + "what explains it, the untried count), the plan and the peak RSS as JSON")
    Path json;

    @CommandLine.Mixin
    LayerScope scope;

    @Option(names = "--budget", paramLabel = "N|TIME", description = "the most candidates to re-run (200) or the longest to search (90s, 10m, 1h); "
            + "default " + k3j.bisect.SearchBudget.DEFAULT_CANDIDATES + " candidates. Candidates run best-fitting first; the rest are listed as not tried")
    String budget;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws java.io.IOException {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        Path model = modelFolder.config().getParent();
        Path dump = ReferenceOption.of(reference);
        if (dump != null && !Files.exists(dump)) throw usage("no such reference dump: " + dump);
        try {
            new k3j.io.Outputs().input(model, "a file of the model folder").input(dump, "the reference (--reference)").input(memory.trunk, "a file of the trunk (--trunk)")
                    .file(json, "--json");
        } catch (java.io.IOException e) {
            throw usage(e.getMessage());
        }
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
             Conformance c = (planned = new PlannedConformance(memory, model, k3j.dump.ReferenceMatch.locate(model, dump, k3j.dump.ReferenceMatch.searchDirs(dumps)), w, false, true,
                     out, err)).conformance) {
            List<Integer> sel = scope.select(c.layerCount());
            if (c.model() == null) {
                err.println("k3 bisect: " + c.bindFailure().getMessage());
                return ExitCode.RUNTIME;
            }
            out.printf(Locale.ROOT, "bisect: %s against %s (%d ids), layers %s%n", model, c.dump().source(), c.tokens(), LayerSelection.format(sel));
            out.println("budget: " + c.budget().rule());
            Bisect.Report r;
            try (LayerRunner runner = LayerRunner.of(c, w)) {
                r = Bisect.run(new LayerConformance(c), runner, sel, scope.experts, searchBudget, d -> {
                    print(out, d);
                    out.flush();
                });
            }
            for (LayerReport l : r.layers()) if (!l.conforms()) out.println(l.line());
            out.printf(Locale.ROOT, "%d of %d layers conform%n", r.layers().size() - r.failing().size(), r.layers().size());
            for (ExpertLayerReport l : r.experts()) if (!l.conforms()) out.println(l.line());
            if (scope.experts) out.printf(Locale.ROOT, "%d of %d MoE layers' experts conform%n", r.experts().size() - r.failingExperts().size(), r.experts().size());
            Bisect.ExpertDiagnosis ed = r.expertDiagnosis();
            if (ed != null) {
                out.printf(Locale.ROOT, "diagnosis of L%d expert %d: %d candidates re-run in %.0f ms%n", ed.layer(), ed.expert(), ed.tried(), ed.nanos() / 1e6);
                if (ed.explained()) for (Candidate e : ed.explanations()) out.println("  L" + ed.layer() + ": " + e.describe());
                else out.println("  L" + ed.layer() + " expert " + ed.expert() + ": nothing explains it");
            }
            planned.report(out);
            k3j.verdict.Verdict verdict = r.verdict(scope.experts).against(c.dump().producer(), c.dump().promptId());
            if (json != null) writeJson(r, verdict, planned);
            out.printf(Locale.ROOT, "BISECT: %s (%.1f s)%n", r.summary(), (System.nanoTime() - t0) / 1e9);
            out.print(verdict.text());
            return verdict.exitCode();
        } catch (k3j.plan.PlanRefused e) {
            err.println(e.getMessage());
            return e.refusal().exitCode();
        } catch (ConformException | BisectException | CheckpointException | ConfigException | k3j.trunk.TrunkException | k3j.model.ForwardException e) {
            err.println("k3 bisect: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }

    /** One failing layer's diagnosis: the evidence, the family order it gave, what was tried, what explains it and what was not tried. */
    private static void print(PrintWriter out, Bisect.Diagnosis d) {
        out.printf(Locale.ROOT, "diagnosis of L%d %s: %d candidates re-run in %.0f ms (budget %s)%n", d.layer(), d.stage().key, d.tried(), d.nanos() / 1e6,
                d.budget().describe());
        out.println("  evidence: " + d.evidence().describe());
        out.println("  family order: " + d.evidence().familyOrder());
        out.println("  tried: " + d.triedByFamily());
        if (d.explained()) for (Bisect.Explanation e : d.explanations()) out.println("  L" + d.layer() + ": " + e.describe());
        else out.println("  L" + d.layer() + ": nothing explains it");
        out.println("  " + d.notTried());
    }

    /** The diagnoses as JSON (the shape docs/formats.md names): one object per failing layer, the plan and the peak RSS. */
    private void writeJson(Bisect.Report r, k3j.verdict.Verdict verdict, PlannedConformance planned) throws java.io.IOException {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        var root = mapper.createObjectNode();
        root.put("verdict", r.summary());   // the diagnoses' summary line (docs/formats.md §16); the decision is "decision"
        root.set("decision", mapper.valueToTree(verdict.json()));
        var failing = root.putArray("failing_layers");
        r.failing().forEach(failing::add);
        var arr = root.putArray("diagnoses");
        for (Bisect.Diagnosis d : r.diagnoses()) arr.add(mapper.valueToTree(d.fields()));
        k3j.plan.MemInfo.peakRss().ifPresent(p -> root.put("peak_rss_bytes", p));
        if (planned.plan() != null) {
            root.put("plan_total_bytes", planned.plan().total());
            root.put("plan_bisect_scratch_bytes", planned.plan().bisect());
        }
        k3j.io.AtomicWrite.string(json, "--json", mapper.writerWithDefaultPrettyPrinter().writeValueAsString(root));
        out(json);
    }

    private void out(Path p) {
        spec.commandLine().getOut().println("json: " + p);
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }
}
