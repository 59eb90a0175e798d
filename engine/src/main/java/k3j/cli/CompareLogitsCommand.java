package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.conform.ConformException;
import k3j.conform.Finding;
import k3j.conform.LogitFile;
import k3j.conform.LogitParity;
import k3j.conform.ReferenceDump;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 compare-logits FILE --reference DUMP [--position N]}: one engine's logits at one position against
 * the reference dump's teacher-forced row, with the figures of the per-position comparison (max |diff|, its
 * ratio to max |ref| against the logits budget, argmax, top-10 overlap, correlation) and the first rank at
 * which the two orders part.
 */
@Command(name = "compare-logits", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Compare a logit file (--dump-logits raw float32, .npy, or a candidate dump) against a reference dump's logits at one position.",
        footer = {"Formats (docs/formats.md): exactly V raw little-endian float32 (the C engine's and k3j's --dump-logits: the last prompt position);",
                ".npy '<f4' C order, [V] or [T, V]; a candidate dump directory (its logits [T, V]). Wrong length or a non-finite value is refused.",
                "Exit codes: 0 within budget and the same argmax, 1 not, 2 bad usage or a refused file."})
final class CompareLogitsCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "FILE", description = "the engine's logits")
    Path file;

    @CommandLine.ArgGroup(exclusive = false, multiplicity = "1")
    ReferenceOption reference;

    @Option(names = "--position", paramLabel = "N", description = "the position the file's vector (or the row of a [T, V] file) is for; "
            + "default the last prompt position (what --dump-logits writes)")
    Integer position;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        ReferenceDump ref;
        try {
            ref = ReferenceDump.open(reference.dump);
        } catch (ConformException e) {
            throw usage(e.getMessage());
        }
        int[] ids = ref.ids();
        int t = ids.length, v = ref.shape("logits")[1];
        int pos = position != null ? position : ref.promptIds().length - 1;
        if (pos < 0 || pos >= t) throw usage("--position " + pos + " is outside the reference's 0.." + (t - 1));
        LogitFile f;
        try {
            f = LogitFile.read(file, v);
        } catch (LogitFile.LogitFileException | ConformException e) {
            throw usage("refused: " + e.getMessage());
        }
        if (f.rows() != 1 && f.rows() != t) {
            throw usage("refused: " + file + " holds " + f.rows() + " rows; the reference has " + t + " positions (a file holds one vector or all of them)");
        }
        float[] got = f.rows() == 1 ? f.values() : f.row(pos);
        float[] want = java.util.Arrays.copyOfRange(ref.f32("logits"), pos * v, (pos + 1) * v);
        LogitParity.Result r = LogitParity.compare("compare-logits", got, want, new int[] {ids[pos]}, 1, v, ref.budget());
        LogitParity.Position p = r.positions().getFirst();
        int rank = LogitParity.firstDifferingRank(got, want);
        out.println("file                  : " + file + " (" + f.format() + ")");
        out.println("reference             : " + ref.source() + ", position " + pos + " (after id " + ids[pos] + "; prompt " + ref.promptIds().length + " ids)");
        out.printf(Locale.ROOT, "vocab                 : %d%n", v);
        out.printf(Locale.ROOT, "max |diff|            : %.6e%n", r.maxAbsDiff());
        out.printf(Locale.ROOT, "relative to max|ref|  : %.6e   (budget %.2e, %.3gx budget)%n", r.relToMaxRef(), r.budget(), r.ratioToBudget());
        out.printf(Locale.ROOT, "mean |diff|           : %.6e%n", r.meanAbsDiff());
        out.printf(Locale.ROOT, "argmax                : engine %d (%.6f), reference %d (%.6f)%s%n", p.engineArgmax(), got[p.engineArgmax()],
                p.referenceArgmax(), want[p.referenceArgmax()], p.argmaxEqual() ? "" : "   <- differs");
        out.printf(Locale.ROOT, "top-10 overlap        : %d/10%n", p.top10Overlap());
        out.printf(Locale.ROOT, "correlation           : %.9f%n", r.correlation());
        out.println("first differing rank  : " + (rank < 0 ? "none (the same order over all " + v + " ids)" : rank + " (0 = the argmax)"));
        Finding fin = Finding.ofRatio(r.ratioToBudget());
        boolean ok = fin == Finding.CONFORMS && p.argmaxEqual();
        out.println(ok ? "VERDICT: CONFORMS" : "VERDICT: DOES NOT CONFORM " + (fin == Finding.CONFORMS ? Finding.ROUNDING_DRIFT : fin).tag());
        if (fin == Finding.BINDING_ERROR) {
            int[] prompt = ref.promptIds();
            out.println("check the prompt first: logits this far apart are most often for another prompt or position. The reference's are for the "
                    + prompt.length + " ids " + java.util.Arrays.stream(prompt).mapToObj(String::valueOf).collect(java.util.stream.Collectors.joining(","))
                    + " at position " + pos + (position == null ? " (the last; --position N picks another row)" : "")
                    + "; k3 MODEL --ids <those ids> --gen 1 --dump-logits FILE writes that vector");
        }
        return ok ? ExitCode.OK : ExitCode.RUNTIME;
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }
}
