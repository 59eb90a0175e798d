package k3j.api;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.kernels.Workers;
import k3j.model.Assembly;
import k3j.model.Residency;
import k3j.plan.MemInfo;
import k3j.plan.MemoryPlan;
import k3j.verdict.ConformException;

/**
 * A model, or another engine's candidate dump, judged against its PyTorch reference dump: every selected layer
 * run alone from the dump's own inputs and compared stage by stage against the rounding budget, the expert
 * sweep, the logits at every position (full recompute and incremental) and greedy generation.
 *
 * <pre>{@code
 * try (Conform c = Conform.model(Path.of("oracle-fixtures/mini-k3-93"), Plan.resident(), Conform.Options.DEFAULTS)) {
 *     ConformReport r = c.report(c.all(), false);
 *     System.out.println(r.verdict());
 * }
 * }</pre>
 *
 * A model is opened under a memory plan as {@link Engine} opens one (the plan's block goes to the report sink;
 * refused before anything large is allocated, with a RuntimeException that says what does not fit). The stages are separate calls so a
 * caller can show each result as it comes; {@link #report} runs them all.
 */
public final class Conform implements AutoCloseable {
    /**
     * How to judge.
     *
     * @param threads   worker threads of k3j's forward
     * @param reference the reference dump, or null: the one whose manifest matches the model (or that the candidate names)
     * @param dumpDirs  the folders searched for it (besides the model's own folder and the one next to it)
     * @param logits    whether logit parity will run (its KV cache is planned)
     * @param memory    the machine's memory the plan must fit (null: read /proc/meminfo)
     * @param report    where the preset line, the plan block and what was opened go
     * @param notes     the trunk's and the cache's notes
     */
    public record Options(int threads, Path reference, List<Path> dumpDirs, boolean logits, MachineMemory memory, Consumer<String> report, Consumer<String> notes) {
        /** Every processor, the reference found in reference-dumps/, logits compared, this machine's memory, nothing reported. */
        public static final Options DEFAULTS = new Options(Runtime.getRuntime().availableProcessors(), null, ReferenceMatch.searchDirs(List.of()), true, null,
                s -> {}, s -> {});

        /** Keeps a copy of the folders. */
        public Options {
            dumpDirs = List.copyOf(dumpDirs);
        }

        /**
         * These options on {@code n} worker threads.
         *
         * @param n the worker threads
         * @return these options with {@code n} threads
         */
        public Options withThreads(int n) {
            return new Options(n, reference, dumpDirs, logits, memory, report, notes);
        }

        /**
         * These options against the reference dump {@code dump} (null: the matching one), searched for in {@code dirs}.
         *
         * @param dump the reference dump, or null: the one that matches
         * @param dirs the folders searched for it
         * @return these options with that reference
         */
        public Options withReference(Path dump, List<Path> dirs) {
            return new Options(threads, dump, ReferenceMatch.searchDirs(dirs), logits, memory, report, notes);
        }

        /**
         * These options with logit parity and greedy generation run ({@code on}) or left out.
         *
         * @param on whether logits and greedy ids are compared
         * @return these options with logits on or off
         */
        public Options withLogits(boolean on) {
            return new Options(threads, reference, dumpDirs, on, memory, report, notes);
        }

        /**
         * These options with the plan made to fit {@code m} rather than this machine's memory.
         *
         * @param m the memory the plan must fit, or null: this machine's
         * @return these options with that memory
         */
        public Options withMemory(MachineMemory m) {
            return new Options(threads, reference, dumpDirs, logits, m, report, notes);
        }

        /**
         * These options reporting to {@code r} (the preset line, the plan block, what was opened) and noting to {@code n}.
         *
         * @param r the report's sink
         * @param n the notes' sink
         * @return these options with those sinks
         */
        public Options withReport(Consumer<String> r, Consumer<String> n) {
            return new Options(threads, reference, dumpDirs, logits, memory, r, n);
        }
    }

    private final Conformance conformance;
    private final Workers workers;   // owned: closed with this; null when shared or for a candidate
    private final String subject;
    private final boolean logits;
    private MemoryPlan plan;
    private Assembly assembly;
    /** Every layer report {@link #layers} returned: the only ones {@link #report(List, double)} takes. */
    private final java.util.Set<ConformReport.Layer> made = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());

    private Conform(java.util.function.Function<Conform, Conformance> open, Workers workers, String subject, boolean logits) {
        this.workers = workers;
        this.subject = subject;
        this.logits = logits;
        this.conformance = open.apply(this);
    }

    /**
     * The model in {@code modelDir} under {@code plan}, against its matching reference dump.
     *
     * @param modelDir the model folder (config.json and the safetensors shards)
     * @param plan how the weights are held
     * @param o how to judge
     * @return the opened conformance; close it
     */
    public static Conform model(Path modelDir, Plan plan, Options o) {
        return judged(() -> {
            k3j.config.ConfigReader.read(modelDir.resolve("config.json"));   // a folder without one is named as such, before any dump is looked for
            ReferenceDump dump = ReferenceMatch.locate(modelDir, o.reference(), o.dumpDirs());
            return model(modelDir, dump, plan, o);
        });
    }

    /** {@code body}, an engine-internal refusal thrown as the API's own {@link CannotJudge}. */
    private static <T> T judged(java.util.function.Supplier<T> body) {
        try {
            return body.get();
        } catch (ConformException | k3j.io.CheckpointException | k3j.config.ConfigException e) {
            throw CannotJudge.of(e);
        }
    }

    /** The model in {@code modelDir} under {@code plan}, against {@code dump} (already located). */
    static Conform model(Path modelDir, ReferenceDump dump, Plan plan, Options o) {
        Workers w = Workers.of(o.threads());
        try {
            return model(modelDir, dump, plan, o, a -> 0L, w, w);
        } catch (RuntimeException | Error e) {
            w.close();
            throw e;
        }
    }

    /**
     * As {@link #model(Path, ReferenceDump, Plan, Options)} on the caller's {@code workers} (not closed with this); {@code scratch}:
     * bytes the plan counts beyond the forward's, from the bound model (a bisect candidate's scratch).
     */
    static Conform model(Path modelDir, ReferenceDump dump, Plan plan, Options o, ToLongFunction<Assembly> scratch, Workers workers) {
        return model(modelDir, dump, plan, o, scratch, workers, null);
    }

    private static Conform model(Path modelDir, ReferenceDump dump, Plan plan, Options o, ToLongFunction<Assembly> scratch, Workers w, Workers owned) {
        MemInfo mem = o.memory() != null ? o.memory().memInfo() : MemInfo.read();
        if (plan.preset() != null) {
            o.report().accept(String.format(java.util.Locale.ROOT, "preset    : %s (trunk %.2f GB / expert cache %.2f GB)%n", plan.preset(), plan.trunkGb(), plan.cacheGb()));
        }
        Residency r = plan.residency(true, true, o.notes());   // a verdict over a trunk is a verdict over the model's own bytes
        return new Conform(self -> Conformance.open(modelDir, dump, w, r.planned(mem, dump.ids().length, o.logits(), scratch, p -> {
            if (self.plan == null) self.plan = p;
            o.report().accept(p.block(mem));
        }, a -> {
            if (self.assembly == null) self.assembly = a;
            o.report().accept(Residency.describe(a));
        }, o.notes())), owned, modelDir.toString(), o.logits());
    }

    /**
     * Another engine's candidate dump (docs/formats.md), against the reference it names (or {@code o.reference()}).
     *
     * @param candidate the candidate dump: a folder or an .npz file
     * @param o how to judge (its reference and logits)
     * @return the opened conformance; close it
     */
    public static Conform candidate(Path candidate, Options o) {
        return judged(() -> new Conform(self -> Conformance.candidate(candidate, o.reference(), o.dumpDirs()), null, candidate.toString(), o.logits()));
    }

    Conformance conformance() {
        return conformance;
    }

    MemoryPlan memoryPlan() {
        return plan;
    }

    Assembly assembly() {
        return assembly;
    }

    /** {@return the memory plan the model was opened under (null for a candidate, or when the model did not bind)} */
    public PlannedMemory plan() {
        return PlannedMemory.of(plan);
    }

    /** {@return the number of layers the reference dump holds} */
    public int layerCount() {
        return conformance.layerCount();
    }

    /** {@return every layer of the dump} */
    public List<Integer> all() {
        List<Integer> l = new ArrayList<>();
        for (int i = 0; i < conformance.layerCount(); i++) l.add(i);
        return l;
    }

    /**
     * The selected layers, each report told to {@code each} as it is made (with its band); the list returned carries
     * each failing layer's cause, read from every selected layer together ({@link k3j.compare.Causes}).
     *
     * @param selection the layers to run, by index
     * @param each told each layer's report as it is made
     * @return the reports, each failing one with its cause
     */
    public List<ConformReport.Layer> layers(List<Integer> selection, Consumer<ConformReport.Layer> each) {
        return judged(() -> {
            List<LayerReport> out = new ArrayList<>();
            for (int layer : selection) {
                LayerReport r = conformance.layer(layer);
                out.add(r);
                each.accept(new ConformReport.Layer(r));
            }
            List<ConformReport.Layer> judged = k3j.compare.Causes.classify(out, conformance.dump()).stream().map(ConformReport.Layer::new).toList();
            made.addAll(judged);
            return judged;
        });
    }

    /**
     * The expert sweep of the selected layers that have routed experts, each told to {@code each}.
     *
     * @param selection the layers whose MoE experts are swept
     * @param each told each layer's sweep as it is made
     * @return the sweeps, one per MoE layer selected
     */
    public List<ConformReport.Experts> experts(List<Integer> selection, Consumer<ConformReport.Experts> each) {
        return judged(() -> {
            List<ConformReport.Experts> out = new ArrayList<>();
            for (int layer : conformance.moeLayers(selection)) {
                ConformReport.Experts r = new ConformReport.Experts(conformance.experts(layer));
                out.add(r);
                each.accept(r);
            }
            return out;
        });
    }

    /** {@return whether logits are compared: asked for, and there is something to compare (a candidate, or a model that bound)} */
    public boolean hasLogits() {
        return logits && (conformance.candidateDump() != null || conformance.forward() != null);
    }

    /**
     * The elementwise logit comparison at every position ({@code incremental}: the KV-cache path).
     *
     * @param incremental the incremental (KV cache) path rather than full recompute
     * @return the comparison, or the stage that is missing for it
     */
    public ConformReport.Logits logits(boolean incremental) {
        try {
            return new ConformReport.Logits(conformance.teacherForcing(incremental), null);
        } catch (ConformException e) {
            if (e.finding() != k3j.verdict.Finding.MISSING_STAGE) throw CannotJudge.of(e);
            return new ConformReport.Logits(null, e.getMessage());
        }
    }

    /**
     * The graded verdict of a lossy port ({@code k3 conform --lossy}): NMSE and cosine per layer and stage, KL and top-1
     * agreement per position of each logits array held, judged by the thresholds given (null: the shipped defaults).
     *
     * @param selection the layers to grade
     * @param maxKl     the largest mean KL divergence a logits array may have, or null
     * @param minTop1   the smallest share of positions, in percent, whose top-1 id must be the reference's, or null
     * @return the decision and the graded table
     */
    public Graded lossy(List<Integer> selection, Double maxKl, Double minTop1) {
        k3j.compare.LossyReport r = judged(() -> lossy(selection));
        return new Graded(Decision.of(r.verdict(maxKl, minTop1)), r.text(maxKl, minTop1));
    }

    /**
     * A lossy port's grade.
     *
     * @param decision the one decision on every graded item
     * @param table    the graded table as {@code k3 conform --lossy} prints it, the verdict block last
     */
    public record Graded(Decision decision, String table) {}

    k3j.compare.LossyReport lossy(List<Integer> selection) {
        return k3j.compare.LossyReport.of(conformance, selection, logits);
    }

    /** {@return greedy generation against the reference's ids, or the stage missing for it} */
    public ConformReport.Greedy greedy() {
        try {
            return new ConformReport.Greedy(conformance.greedy(), null);
        } catch (ConformException e) {
            if (e.finding() != k3j.verdict.Finding.MISSING_STAGE) throw CannotJudge.of(e);
            return new ConformReport.Greedy(null, e.getMessage());
        }
    }

    /**
     * The report of the layers alone (the seconds they took), before the sweep and the logits.
     *
     * @param layers the layers' reports, from {@link #layers} of this Conform, each layer once
     * @param seconds the seconds they took
     * @return a report of the layers alone
     * @throws IllegalArgumentException a report this Conform did not make (another Conform's, or built elsewhere), or a layer given twice
     */
    public ConformReport report(List<ConformReport.Layer> layers, double seconds) {
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (ConformReport.Layer l : layers) {
            if (!made.contains(l)) throw new IllegalArgumentException("layer " + l.layer() + "'s report was not made by this Conform's layers(): a report covers only what it judged");
            if (l.layer() < 0 || l.layer() >= conformance.layerCount() || !seen.add(l.layer())) {
                throw new IllegalArgumentException("layer " + l.layer() + " is given twice or is not one of the reference's 0.." + (conformance.layerCount() - 1));
            }
        }
        return new ConformReport(subject, conformance.dump().source().toString(), conformance.budget().rule(), layers, seconds, List.of(), List.of(), null);
    }

    /**
     * Every stage: the selected layers, the expert sweep when {@code experts}, then the logits and greedy generation when there is a forward.
     *
     * @param selection the layers to run
     * @param experts whether the expert sweep runs
     * @return the whole report
     */
    public ConformReport report(List<Integer> selection, boolean experts) {
        long t0 = System.nanoTime();
        List<ConformReport.Layer> layers = layers(selection, r -> {});
        double seconds = (System.nanoTime() - t0) / 1e9;
        List<ConformReport.Experts> sweep = experts ? experts(selection, r -> {}) : List.of();
        List<ConformReport.Logits> logits = new ArrayList<>();
        ConformReport.Greedy greedy = null;
        if (hasLogits()) {
            logits.add(logits(false));
            logits.add(logits(true));
            greedy = greedy();
        }
        return new ConformReport(subject, conformance.dump().source().toString(), conformance.budget().rule(), layers, seconds, sweep, logits, greedy, experts);
    }

    /** Closes the dump and the model, and the worker threads this conformance started. */
    @Override
    public void close() {
        try (conformance) {
            if (workers != null) workers.close();
        }
    }
}
