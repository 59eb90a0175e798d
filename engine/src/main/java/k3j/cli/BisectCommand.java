package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.bisect.Bisect;
import k3j.bisect.BisectException;
import k3j.bisect.LayerCheck;
import k3j.bisect.LayerConformance;
import k3j.bisect.LayerRunner;
import k3j.bisect.ReferenceLayers;
import k3j.config.ConfigException;
import k3j.io.CheckpointException;
import k3j.kernels.Workers;
import k3j.model.BindException;
import k3j.model.Model;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 bisect MODEL --reference DUMP}: runs every layer alone from the dump's inputs, names the first
 * layer and stage over budget, and diagnoses it (which mix-up of that layer's weights makes the stage pass,
 * or that none does). The reference is given explicitly, so no dump is auto-matched: the dump must be of the
 * same weights (the comparison itself shows when it is not: every layer fails).
 */
@Command(name = "bisect",
        description = "Per-layer conformance against a reference dump; names and diagnoses the first failing layer and stage.",
        footer = "Exit codes: 0 every layer conforms, 1 a layer fails (or the model/dump cannot be read), 2 bad arguments.")
final class BisectCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "MODEL", description = "the model directory (config.json + safetensors shards)")
    Path model;

    @Option(names = "--reference", required = true, paramLabel = "DUMP", description = "a k3ref-dump directory (reference-dumps/FORMAT.md) of the same weights")
    Path reference;

    @Option(names = "--layers", paramLabel = "A-B", description = "check only layers A..B (default: all)")
    String layers;

    @Option(names = "--threads", paramLabel = "N", description = "worker threads (default: available processors)")
    Integer threads;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        if (!Files.isDirectory(model)) {
            err.println("k3 bisect: " + model + ": not a model directory");
            return ExitCode.USAGE;
        }
        if (!Files.isDirectory(reference)) {
            err.println("k3 bisect: " + reference + ": not a reference dump directory");
            return ExitCode.USAGE;
        }
        int n = threads == null ? Runtime.getRuntime().availableProcessors() : threads;
        if (n < 1) {
            err.println("k3 bisect: --threads must be at least 1");
            return ExitCode.USAGE;
        }
        long t0 = System.nanoTime();
        try (Model m = Model.open(model); Workers w = Workers.of(n); LayerRunner runner = new LayerRunner(m, w)) {
            ReferenceLayers ref = ReferenceLayers.open(reference);
            if (ref.layerCount() != m.config().layerCount() || ref.hidden() != m.config().hiddenSize()) {
                err.println("k3 bisect: " + reference + " has " + ref.layerCount() + " layers of width " + ref.hidden() + ", the model "
                        + m.config().layerCount() + " of width " + m.config().hiddenSize() + ": a dump of another model");
                return ExitCode.USAGE;
            }
            int from = 0, to = ref.layerCount() - 1;
            if (layers != null) {
                String[] p = layers.split("-", 2);
                try {
                    from = Integer.parseInt(p[0].trim());
                    to = p.length == 1 ? from : Integer.parseInt(p[1].trim());
                } catch (NumberFormatException e) {
                    err.println("k3 bisect: --layers '" + layers + "': expected A-B");
                    return ExitCode.USAGE;
                }
                if (from < 0 || to < from || to >= ref.layerCount()) {
                    err.println("k3 bisect: --layers " + layers + " is outside 0-" + (ref.layerCount() - 1));
                    return ExitCode.USAGE;
                }
            }
            out.printf(Locale.ROOT, "bisect: %s against %s (%d tokens), layers %d-%d%n", model, reference, ref.tokens(), from, to);
            Bisect.Report r = Bisect.run(runner, new LayerConformance(ref), from, to);
            for (LayerCheck c : r.layers()) {
                out.printf(Locale.ROOT, "L%-3d %-3s %s  worst %.3g x budget%s%n", c.layer(), c.mixer().toUpperCase(Locale.ROOT),
                        c.passes() ? "PASS" : "FAIL", c.worst(), c.passes() ? "" : "  first failing stage " + c.firstFailing().key);
            }
            if (r.diagnosis() != null) {
                Bisect.Diagnosis d = r.diagnosis();
                out.printf(Locale.ROOT, "diagnosis: L%d %s, %d candidates re-run in %.0f ms%n", d.layer(), d.stage().key, d.tried(), d.nanos() / 1e6);
                if (d.explained()) for (Bisect.Explanation e : d.explanations()) out.println("  L" + d.layer() + ": " + e.describe());
                else out.println("  L" + d.layer() + ": nothing explains it");
            }
            out.printf(Locale.ROOT, "VERDICT: %s (%.1f s)%n", r.summary(), (System.nanoTime() - t0) / 1e9);
            return r.diagnosis() == null ? ExitCode.OK : ExitCode.RUNTIME;
        } catch (BisectException | CheckpointException | BindException | ConfigException e) {
            err.println("k3 bisect: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }
}
