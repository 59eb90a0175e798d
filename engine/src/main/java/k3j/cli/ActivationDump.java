package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import k3j.capture.CandidateWriter;
import k3j.capture.ReferenceWriter;
import k3j.compare.Conformance;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.kernels.Workers;
import k3j.verdict.ConformException;

/**
 * {@code k3 MODEL --ids PROMPT --dump-activations DIR}: k3j's own activations as a candidate dump, so that k3j
 * is judged by the same path as any other engine ({@code k3 conform --candidate DIR} gives the verdicts of
 * {@code k3 conform MODEL}). The layers run from the reference's inputs, so the prompt must be its prompt.
 */
final class ActivationDump {
    private ActivationDump() {}

    /** The reference the candidate will be made against; refuses (IllegalArgumentException: usage) another prompt. */
    static ReferenceDump reference(Path modelDir, Path explicit, int[] promptIds) {
        ReferenceDump d = ReferenceMatch.locate(modelDir, explicit, ReferenceMatch.searchDirs(List.of()));
        if (!Arrays.equals(promptIds, d.promptIds())) {
            throw new IllegalArgumentException("--dump-activations and --dump-reference run every layer from the reference's inputs, so --ids must be its prompt "
                    + Arrays.toString(d.promptIds()).replace(" ", "") + " (" + d.source() + ")");
        }
        return d;
    }

    /**
     * {@code --dump-reference DIR}: k3j's results in the reference format (ReferenceWriter), computed under the memory
     * plan of the flags (any --trunk / --cache-gb / preset: the FP contract makes the bits the same).
     */
    static int writeReference(PrintWriter o, PrintWriter err, MemoryOptions memory, Path modelDir, ReferenceDump ref, Path dir, int threads) {
        long t0 = System.nanoTime();
        try (Workers w = Workers.of(threads); Conformance c = new PlannedConformance(memory, modelDir, ref, w, true, o, err).conformance) {
            ReferenceWriter.write(c, dir, producer());
            o.printf(java.util.Locale.ROOT, "wrote %s (reference dump by %s: %d layers run from %s's inputs, logits, greedy ids) in %.1f s%n",
                    dir, K3.VERSION, c.layerCount(), ref.source(), (System.nanoTime() - t0) / 1e9);
            return ExitCode.OK;
        } catch (k3j.plan.PlanRefused e) {
            err.println(e.getMessage());
            return e.refusal().exitCode();
        } catch (IOException | ConformException | IllegalArgumentException e) {
            err.println("k3: --dump-reference: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
    }

    /** k3j, its version, its build (the sha256 of the running k3.jar, when it runs from one) and the FP contract. */
    static ReferenceWriter.Producer producer() {
        String build = "classes (no jar)";
        try {
            java.net.URL url = ActivationDump.class.getProtectionDomain().getCodeSource().getLocation();
            Path jar = Path.of(url.toURI());
            if (java.nio.file.Files.isRegularFile(jar)) {
                java.security.MessageDigest md = java.security.MessageDigest.getInstance("SHA-256");
                try (var in = new java.security.DigestInputStream(k3j.io.SafeFiles.newInputStream(jar, "the k3 jar"), md)) {
                    in.transferTo(java.io.OutputStream.nullOutputStream());
                }
                build = jar.getFileName() + " sha256 " + java.util.HexFormat.of().formatHex(md.digest()).substring(0, 16);
            }
        } catch (IOException | java.net.URISyntaxException | java.security.NoSuchAlgorithmException | SecurityException e) {
            build = "unknown (" + e.getClass().getSimpleName() + ")";
        }
        return new ReferenceWriter.Producer("k3j", K3.VERSION.replaceAll(".* ", ""), build, "docs/fp-contract.md (float32, one summation order at every budget, thread count and JVM)");
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
