package k3j.harness;

import java.nio.file.Path;
import java.util.function.Consumer;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.kernels.Workers;
import k3j.model.Model;

/**
 * The untouched 93-layer oracle, bound once, judged layer by layer against its dump or a tampered copy of it,
 * as {@code k3 conform} judges it: the gates that tamper with dumps share this one binding.
 */
public final class OracleLayers implements AutoCloseable {
    private final Model model;
    private final Workers workers;

    private OracleLayers(Model model, Workers workers) {
        this.model = model;
        this.workers = workers;
    }

    /** mini-k3-93 bound on one worker. */
    public static OracleLayers open() {
        Workers w = Workers.of(1);
        return new OracleLayers(Model.open(Project.fixture("mini-k3-93")), w);
    }

    public Workers workers() {
        return workers;
    }

    /** Layer {@code layer} of the oracle against {@code dump} (one at a time: the model and its worker are shared). */
    public synchronized LayerReport layer(Path dump, int layer) {
        return Conformance.of(model.forward(workers), ReferenceDump.open(dump)).layer(layer);
    }

    /** A copy of the oracle's reference dump at {@code into}, changed by {@code tamper}. */
    public static Path tamperedDump(Path into, Consumer<Path> tamper) {
        Path d = Tamper.copy(Project.dump("mini-k3-93"), into);
        tamper.accept(d);
        return d;
    }

    @Override
    public void close() {
        model.close();
        workers.close();
    }
}
