package k3j.harness;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.compare.Conformance;
import k3j.compare.LayerSelection;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.kernels.Workers;
import k3j.model.Residency;
import k3j.plan.AutoBudget;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.plan.PlanRefused;
import k3j.plan.Preset;
import k3j.trunk.StreamOptions;
import k3j.verdict.ConformException;

/**
 * The checkpoint (or the candidate dump, -Dk3.candidate) under test, shared by the checkpoint gates: -Dk3.model (relative to the repository root
 * when relative), -Dk3.reference (else the matching dump in reference-dumps/, in the model directory or
 * next to it), -Dk3.layers, and the memory plan it runs under ({@link #residency}). Opened once per test JVM; a failure to open is remembered and FAILS every case.
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
                AllureEnvironment.put("k3.reference", conformance.dump().source() + " — " + conformance.dump().producer() + (ref.isEmpty() ? " (found: the candidate names its manifest's sha256)" : ""));
                return conformance;
            }
            String m = Project.property("k3.model");
            if (m.isEmpty()) throw new AssertionError("gate data missing: -Dk3.model is not set (mvn verify -Pcheckpoint -Dk3.model=DIR)");
            Path model = resolve(m);
            if (!Files.isDirectory(model)) throw new AssertionError("gate data missing: -Dk3.model=" + m + " is not a readable directory (" + model + ")");
            ReferenceDump dump = ReferenceMatch.locate(model, ref.isEmpty() ? null : resolve(ref), dumps);
            MemInfo mem = MemInfo.read();
            conformance = Conformance.open(model, dump, workers, residency(mem).planned(mem, dump.ids().length, true, p -> {
                System.out.print(p.block(mem));
                AllureEnvironment.put("k3.plan", "TOTAL " + Human.bytes(p.total()) + (p.trunkStreamed() ? ", trunk streamed " : ", trunk resident ")
                        + Human.bytes(p.trunk()) + ", experts " + Human.bytes(p.expertCache()));
            }, a -> System.out.print(Residency.describe(a)), System.out::println));
            AllureEnvironment.put("k3.reference", dump.source() + " — " + dump.producer() + (ref.isEmpty() ? " (found: its manifest matches the model's shards)" : ""));
            return conformance;
        } catch (PlanRefused e) {
            failure = new IllegalStateException("the checkpoint under test does not fit its memory plan (-Dk3.trunk, -Dk3.trunkGb, -Dk3.cacheGb, -Dk3.preset): "
                    + e.getMessage(), e);
            throw failure;
        } catch (AssertionError | ConformException e) {
            failure = e instanceof ConformException ce ? ce : new IllegalStateException(e.getMessage(), e);
            throw failure;
        } catch (RuntimeException e) {
            failure = new IllegalStateException("cannot open the checkpoint under test: " + e, e);
            throw failure;
        }
    }

    /**
     * The memory plan of the checkpoint under test, as {@code k3 conform}'s flags give it: -Dk3.trunk=DIR (a packed
     * trunk to stream the decoder layers from), -Dk3.trunkGb, -Dk3.cacheGb (the routed experts through the expert
     * cache), -Dk3.preset (a named preset or auto; the two budgets override it). None set: resident, as a run.
     */
    static Residency residency(MemInfo mem) {
        String trunk = Project.property("k3.trunk"), trunkGb = Project.property("k3.trunkGb"), cacheGb = Project.property("k3.cacheGb"),
                preset = Project.property("k3.preset");
        if (trunk.isEmpty() && (!trunkGb.isEmpty() || !preset.isEmpty())) {
            throw new AssertionError("-Dk3.trunkGb and -Dk3.preset need -Dk3.trunk=DIR (a packed trunk: k3 pack-trunk MODEL DIR)");
        }
        Path dir = trunk.isEmpty() ? null : resolve(trunk);
        if (dir != null && !Files.isDirectory(dir)) throw new AssertionError("gate data missing: -Dk3.trunk=" + trunk + " is not a directory (" + dir + ")");
        double t = 16, c = Residency.RESIDENT.cacheBytes() / 1e9;
        boolean ultra = false;
        if (preset.equals(Preset.AUTO)) {
            AutoBudget a = AutoBudget.of(mem);
            t = a.trunkGb();
            c = a.cacheGb();
        } else if (!preset.isEmpty()) {
            Preset p = Preset.parse(preset);
            ultra = p.ultra();
            t = p.trunkGb();
            c = p.cacheGb();
        }
        if (!trunkGb.isEmpty()) t = gb("k3.trunkGb", trunkGb);
        if (!cacheGb.isEmpty()) c = gb("k3.cacheGb", cacheGb);
        return new Residency(dir, dir == null ? null : StreamOptions.budget(Math.round(t * 1e9)).withNotes(System.out::println).withWitness(true), Math.round(c * 1e9),
                !cacheGb.isEmpty() || !preset.isEmpty(), ultra);
    }

    private static double gb(String name, String value) {
        try {
            double v = Double.parseDouble(value);
            if (v > 0) return v;
        } catch (NumberFormatException ignored) {
            // refused below
        }
        throw new AssertionError("-D" + name + " must be a positive number of GB, got '" + value + "'");
    }

    public static synchronized Workers workers() {
        open();
        return workers;
    }

    /**
     * The -Dk3.layers selection, or -Dk3.shard=I/N's part of the work plan ({@code k3 conform --shard}'s layers, the
     * logit part counted: docs/formats.md §18.2); all layers when neither is set.
     */
    public static List<Integer> selected() {
        String shard = Project.property("k3.shard"), layers = Project.property("k3.layers");
        if (shard.isEmpty()) return LayerSelection.parse(layers, open().layerCount());
        if (!layers.isEmpty()) throw new AssertionError("-Dk3.shard=" + shard + " picks the layers from the work plan: not with -Dk3.layers=" + layers);
        if (!Project.property("k3.candidate").isEmpty()) throw new AssertionError("-Dk3.shard splits k3j's run of -Dk3.model, not a candidate");
        Conformance c = open();
        Path model = resolve(Project.property("k3.model"));
        var id = k3j.fleet.ShardId.parse(shard, System.getenv());
        var plan = k3j.fleet.WorkPlan.of(k3j.io.CheckpointIndex.open(model).tensors(), k3j.config.ConfigReader.read(model.resolve("config.json")), c.tokens(),
                c.dump().generatedIds().length, true, false, id.count());
        return plan.part(id.index()).layers();
    }

    public static Path resolve(String p) {
        Path path = Path.of(p);
        return path.isAbsolute() ? path : Project.root().resolve(path).normalize();
    }
}
