package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import k3j.conform.CandidateWriter;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.ReferenceDump;
import k3j.conform.ReferenceMatch;
import k3j.kernels.Workers;

/**
 * {@code k3 MODEL --ids PROMPT --dump-activations DIR}: k3j's own activations as a candidate dump, so that k3j
 * is judged by the same path as any other engine ({@code k3 conform --candidate DIR} gives the verdicts of
 * {@code k3 conform MODEL}). The layers run from the reference's inputs, so the prompt must be its prompt.
 */
final class ActivationDump {
    private ActivationDump() {}

    /** The reference the candidate will be made against; refuses (IllegalArgumentException: usage) another prompt. */
    static ReferenceDump reference(Path modelDir, Path explicit, int[] promptIds) {
        ReferenceDump d = ReferenceMatch.locate(modelDir, explicit, ReferenceSearch.dirs(List.of()));
        if (!Arrays.equals(promptIds, d.promptIds())) {
            throw new IllegalArgumentException("--dump-activations runs every layer from the reference's inputs, so --ids must be its prompt "
                    + Arrays.toString(d.promptIds()).replace(" ", "") + " (" + d.source() + ")");
        }
        return d;
    }

    static int write(PrintWriter o, PrintWriter err, Path modelDir, ReferenceDump ref, Path dir, int threads) {
        long t0 = System.nanoTime();
        try (Workers w = Workers.of(threads); Conformance c = Conformance.open(modelDir, ref, w)) {
            int ran = CandidateWriter.write(c, dir, "k3j 0.1.0");
            o.printf(java.util.Locale.ROOT, "wrote %s (candidate dump: %d of %d layers from %s's inputs, logits full + incremental, greedy ids) in %.1f s%n",
                    dir, ran, c.layerCount(), ref.source(), (System.nanoTime() - t0) / 1e9);
            return ran == c.layerCount() ? ExitCode.OK : ExitCode.RUNTIME;
        } catch (IOException | ConformException e) {
            err.println("k3: --dump-activations: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }
}
