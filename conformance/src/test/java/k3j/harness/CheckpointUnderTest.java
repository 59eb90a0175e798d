package k3j.harness;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.LayerSelection;
import k3j.kernels.Workers;

/**
 * The checkpoint (or the candidate dump, -Dk3.candidate) under test, shared by the checkpoint gates: -Dk3.model (relative to the repository root
 * when relative), -Dk3.reference (else the matching dump in reference-dumps/, in the model directory or
 * next to it), -Dk3.layers. Opened once per test JVM; a failure to open is remembered and FAILS every case.
 */
public final class CheckpointUnderTest {
    private CheckpointUnderTest() {}

    private static Conformance conformance;
    private static RuntimeException failure;
    private static Workers workers;

    public static synchronized Conformance open() {
        if (conformance != null) return conformance;
        if (failure != null) throw new IllegalStateException(failure.getMessage(), failure); // fresh: each case's own trace
        try {
            String cand = Project.property("k3.candidate"), ref = Project.property("k3.reference");
            List<Path> dumps = List.of(Project.root().resolve("reference-dumps"));
            workers = Workers.of(Runtime.getRuntime().availableProcessors());
            if (!cand.isEmpty()) {
                Path p = resolve(cand);
                if (!Files.exists(p)) throw new AssertionError("gate data missing: -Dk3.candidate=" + cand + " does not exist (" + p + ")");
                conformance = Conformance.candidate(p, ref.isEmpty() ? null : resolve(ref), dumps);
                AllureEnvironment.put("k3.reference", conformance.dump().source() + (ref.isEmpty() ? " (found: the candidate names its manifest's sha256)" : ""));
                return conformance;
            }
            String m = Project.property("k3.model");
            if (m.isEmpty()) throw new AssertionError("gate data missing: -Dk3.model is not set (mvn verify -Pcheckpoint -Dk3.model=DIR)");
            Path model = resolve(m);
            if (!Files.isDirectory(model)) throw new AssertionError("gate data missing: -Dk3.model=" + m + " is not a readable directory (" + model + ")");
            conformance = Conformance.open(model, ref.isEmpty() ? null : resolve(ref), dumps, workers);
            AllureEnvironment.put("k3.reference", conformance.dump().source() + (ref.isEmpty() ? " (found: its manifest matches the model's shards)" : ""));
            return conformance;
        } catch (AssertionError | ConformException e) {
            failure = e instanceof ConformException ce ? ce : new IllegalStateException(e.getMessage(), e);
            throw failure;
        } catch (RuntimeException e) {
            failure = new IllegalStateException("cannot open the checkpoint under test: " + e, e);
            throw failure;
        }
    }

    public static synchronized Workers workers() {
        open();
        return workers;
    }

    /** The -Dk3.layers selection (all layers when unset). */
    public static List<Integer> selected() {
        return LayerSelection.parse(Project.property("k3.layers"), open().layerCount());
    }

    public static Path resolve(String p) {
        Path path = Path.of(p);
        return path.isAbsolute() ? path : Project.root().resolve(path).normalize();
    }
}
