package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import k3j.api.Conform;
import k3j.api.ConformReport;
import k3j.conform.Charts;
import k3j.io.AtomicWrite;
import k3j.conform.ConformException;
import k3j.conform.Conformance;
import k3j.conform.ExpertLayerReport;
import k3j.conform.ExpertReport;
import k3j.conform.Finding;
import k3j.conform.LayerReport;
import k3j.conform.LayerSelection;
import k3j.conform.ReferenceDump;
import k3j.conform.ReferenceMatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 conform MODEL [--reference DUMP] [--layers 0-92|40,41,50-60]}: the checkpoint gates without
 * Maven: every selected layer run alone from the reference dump's own inputs and
 * compared stage by stage against the rounding budget (docs/semantics.md §10.7), then logit parity at every position (full
 * recompute and incremental) and greedy generation. {@code --verify-data} hashes every byte of the model
 * against the dump's sha256 list instead.
 */
@Command(name = "conform", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Per-layer conformance and logit parity of a checkpoint against its torch reference dump.",
        footer = {"The dump defaults to the one whose manifest matches the model's shards (names, sizes, header sha256),",
                "searched in --dumps, ./reference-dumps, the repository's reference-dumps/, the model directory and next to it.",
                "Exit codes: 0 every layer and the logits conform, 1 something does not (or a runtime failure), 2 bad usage,",
                "3 (--merge) INCOMPLETE: a shard is missing, duplicated, unfinished or foreign."})
final class ConformCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder modelFolder;

    @CommandLine.Mixin
    ThreadsOption threads;

    @CommandLine.Mixin
    MemoryOptions memory;

    @Option(names = "--candidate", paramLabel = "DUMP", description = "judge another engine's candidate dump (docs/formats.md) instead of running k3j: "
            + "same stages, budgets, categories and logit figures; the reference defaults to the one the candidate names")
    Path candidate;

    @CommandLine.ArgGroup(exclusive = false)
    ReferenceOption reference;

    @CommandLine.Mixin
    LayerScope scope;

    @CommandLine.Mixin
    LossyOptions lossy;

    @Option(names = "--against", paramLabel = "DUMP", description = "with --candidate A: another candidate dump B of the same engine in another mode "
            + "(chunked, restored, batched); names the first layer, stage and position where A and B part, then judges each against the reference")
    Path against;

    @Option(names = "--digests", paramLabel = "FILE", description = "with --merge: the model's per-tensor digest manifest (k3 digest MODEL --out FILE); "
            + "every shard's tensors must be its")
    Path digests;

    @Option(names = "--dumps", paramLabel = "DIR", description = "another folder to search for the matching dump (repeatable)")
    List<Path> dumps = new ArrayList<>();

    @Option(names = "--no-logits", description = "per-layer conformance only")
    boolean noLogits;

    @Option(names = "--verify-data", description = "hash every file of the model against the dump's sha256 list (reads all bytes) and stop")
    boolean verifyData;

    @Option(names = "--chart", paramLabel = "FILE", description = "write the layers x stages SVG chart (outputs: docs/files.md)")
    Path chart;

    @Option(names = "--json", paramLabel = "FILE", description = "write every layer's verdict and stage ratios (full double precision), the wall time "
            + "per layer and the peak RSS as JSON")
    Path json;

    @Option(names = "--shard", paramLabel = "I/N|auto", description = "judge shard I of N (from 0) of the run, balanced by work (docs/formats.md §18); "
            + "auto reads SLURM_ARRAY_TASK_ID, JOB_COMPLETION_INDEX or PBS_ARRAY_INDEX, with K3_SHARD_COUNT (or Slurm's array size); needs --results")
    String shard;

    @Option(names = "--results", paramLabel = "ROOT", description = "with --shard: the shared folder the shard writes its own shard-I-of-N/ folder into")
    Path results;

    @Option(names = "--merge", paramLabel = "ROOT", description = "merge the shard folders under ROOT into one verdict (and --json); "
            + "exit 3 INCOMPLETE when a shard is missing, duplicated, unfinished or foreign")
    Path merge;

    @Option(names = "--shard-plan", paramLabel = "N", description = "print the work plan of N shards (each one's layers, logit part, expert ranges, "
            + "bytes read and work) from the model's headers and the matching dump's token counts, and stop; with --experts the sweep is in it")
    Integer shardPlan;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        if (merge != null) return merged(out, err);
        if (shardPlan != null) return shardPlan(out);
        k3j.fleet.ShardId shardId = shardId();
        if (candidate != null && modelFolder.given()) throw usage("--candidate judges a dump without a model: give no MODEL_DIR");
        if (candidate != null && verifyData) throw usage("--verify-data hashes a model's files: not with --candidate");
        if (candidate == null && !modelFolder.given()) throw usage("give MODEL_DIR, or --candidate DUMP");
        Path model = modelFolder.given() ? modelFolder.config().getParent() : null;
        if (candidate != null && !java.nio.file.Files.exists(candidate)) throw usage("--candidate " + candidate + ": no such file or folder (a candidate dump: docs/formats.md)");
        try {
            k3j.io.Outputs files = new k3j.io.Outputs().input(model, "a file of the model folder").input(candidate, "the candidate (--candidate)")
                    .input(ReferenceOption.of(reference), "the reference (--reference)").input(memory.trunk, "a file of the trunk (--trunk)");
            files.file(json, "--json");
            files.file(chart, "--chart");
        } catch (IOException e) {
            throw usage(e.getMessage());
        }
        if (model != null) {
            try {
                k3j.io.CheckpointIndex.open(model);   // a missing or short shard is the partial download it is, not a reference mismatch
            } catch (k3j.io.CheckpointException e) {
                err.println("k3: " + e.getMessage());
                return ExitCode.RUNTIME;
            }
        }
        int workers = threads.count();
        List<Path> search = ReferenceSearch.dirs(dumps);
        if (verifyData) {
            ReferenceDump d = ReferenceMatch.locate(model, ReferenceOption.of(reference), search);
            out.println("reference: " + d.source());
            ReferenceMatch.verifyData(d, model, out::println);
            out.println("VERIFIED: every listed file's sha256 equals the dump's");
            return ExitCode.OK;
        }
        if (against != null) {
            if (candidate == null) throw usage("--against B compares two candidate dumps: give --candidate A");
            if (lossy.on || scope.experts || json != null || chart != null) throw usage("--against names where two candidates part: not with --lossy, --experts, --json or --chart");
            return against(out, threads.count(), search);
        }
        if (scope.experts && candidate != null) throw usage("--experts runs k3j's forward on a model; a candidate dump holds no expert outputs");
        if (candidate != null && memory.given()) throw usage("--trunk, --trunk-gb, --cache-gb and --preset plan k3j's forward: not with --candidate");
        memory.validate();
        if (model != null) scope.check(modelFolder.config());
        lossy.validate(spec.commandLine());
        if (lossy.on && scope.experts) throw usage("--lossy grades layers and logits; --experts judges experts by the float32 budget: not together");
        long t0 = System.nanoTime();
        k3j.conform.Verdict verdict;
        Conform.Options o = Conform.Options.DEFAULTS.withThreads(workers).withReference(ReferenceOption.of(reference), search).withLogits(!noLogits);
        try (Conform judge = candidate != null ? Conform.candidate(candidate, o) : planned(model, o, out, err)) {
            Conformance c = ApiInternals.get().conformance(judge);
            List<Integer> sel = scope.select(c.layerCount());
            k3j.fleet.WorkPlan.Part part = null;
            Path shardDir = null;
            k3j.fleet.Identity identity = null;
            if (shardId != null) {
                var cfg = k3j.config.ConfigReader.read(modelFolder.config());
                var index = k3j.io.CheckpointIndex.open(model);
                k3j.fleet.WorkPlan plan;
                try {
                    plan = k3j.fleet.WorkPlan.of(index.tensors(), cfg, c.tokens(), c.dump().generatedIds().length, !noLogits, scope.experts, shardId.count());
                } catch (IllegalArgumentException e) {
                    throw usage("--shard " + shardId + ": " + e.getMessage());
                }
                part = plan.part(shardId.index());
                shardPart = part;
                sel = part.layers();
                identity = new k3j.fleet.Identity(k3j.fleet.Identity.model(model, index.shards(), index.tensors()), c.dump().manifestSha256(), k3j.fleet.Identity.runningBuild(),
                        shardId.count(), "logits=" + !noLogits + " experts=" + scope.experts, k3j.fleet.Identity.plan(plan));
                try {
                    shardDir = k3j.fleet.ShardFolder.start(results, shardId, identity, part, model);
                } catch (IOException e) {
                    throw usage(e.getMessage());
                }
                out.println("shard     : " + shardId + " of the plan " + identity.plan() + " -> " + shardDir);
            }
            out.println(candidate != null ? "candidate : " + c.engine() : "model     : " + model);
            out.println("reference : " + c.dump().source() + " (" + c.tokens() + " ids; " + c.dump().producer() + ")");
            out.println("budget    : " + c.budget().rule());
            if (c.bindFailure() != null) err.println("k3: " + c.bindFailure().getMessage());
            out.flush();
            if (lossy.on) return graded(judge, sel, out);
            if (json != null) startJson(judge, sel, model);
            List<LayerReport> raw = new ArrayList<>();
            List<ConformReport.Layer> layers = judge.layers(sel, r -> {
                raw.add(ApiInternals.get().layer(r));
                out.println(r.line());
                out.flush();
                judged.put("L" + r.layer(), r.conforms());
            });
            ConformReport report = judge.report(layers, (System.nanoTime() - t0) / 1e9);
            int failed = report.failing().size();
            List<LayerReport> layerReports = layers.stream().map(ApiInternals.get()::layer).toList();
            java.util.function.Function<LayerReport, k3j.fleet.Judged.Layer> withBoundary = r -> new k3j.fleet.Judged.Layer(r, c.dump().layer(r.layer()).boundary());
            List<k3j.fleet.Judged.Layer> judgedLayers = layerReports.stream().map(withBoundary).toList();
            out.print(k3j.fleet.Summary.layers(new k3j.fleet.Judged(judgedLayers, null, List.of(), List.of(), null), sel, report.layerSeconds()));
            List<ConformReport.Experts> swept = List.of();
            List<k3j.fleet.Judged.Experts> sweptParts = List.of();
            if (scope.experts && part != null) {
                List<k3j.conform.ExpertSweep.Range> ranges = sweepRanges(c, part.experts(), out, judged);
                sweptParts = ranges.stream().map(x -> new k3j.fleet.Judged.Experts(x.layer(), x.kind(), x.total(), x.from(), x.to(), x.experts(), x.seconds())).toList();
            } else if (scope.experts) {
                swept = sweep(judge, sel, out, judged);
                sweptParts = swept.stream().map(ApiInternals.get()::experts).map(k3j.fleet.Judged.Experts::of).toList();
            }
            if (candidate == null) report(out, judge);
            else k3j.plan.MemInfo.peakRss().ifPresent(p -> out.println("PEAK RSS for the whole run: " + k3j.plan.Human.bytes(p)));
            if (chart != null) {
                AtomicWrite.string(chart, "--chart", Charts.overview(layerReports, "layers x stages: " + (candidate != null ? candidate : model).getFileName()));
                out.println("chart: " + chart);
            }
            List<ConformReport.Logits> logits = new ArrayList<>();
            ConformReport.Greedy greedy = null;
            if (judge.hasLogits() && (part == null || part.logits())) {
                for (boolean incremental : new boolean[] {false, true}) {
                    logits.add(judge.logits(incremental));
                    int f = logits(out, logits.getLast());
                    judged.put(incremental ? PLAN_LOGITS_INCREMENTAL : PLAN_LOGITS_FULL, f == 0);
                }
                greedy = judge.greedy();
                judged.put(PLAN_GREEDY, greedy(out, greedy) == 0);
            }
            verdict = ApiInternals.get().verdict(new ConformReport(report.subject(), report.reference(), report.budget(), layers, report.layerSeconds(), swept, logits, greedy))
                    .against(c.dump());
            String sweepText = scope.experts ? c.expertSweep().describe() : null;
            List<k3j.fleet.Judged.Block> blocks = logits.stream().map(l -> k3j.fleet.Judged.logits(ApiInternals.get().logits(l), l.missing())).toList();
            k3j.fleet.Judged.Block greedyBlock = greedy == null ? null : k3j.fleet.Judged.greedy(ApiInternals.get().greedy(greedy), greedy.missing());
            var all = new k3j.fleet.Judged(judgedLayers, sweepText, sweptParts, blocks, greedyBlock);
            if (part != null && scope.experts) {
                // a shard's expert ranges are not whole layers: its own verdict judges each range as a whole (the merge joins them)
                List<k3j.conform.Invariants.Item> items = new ArrayList<>();
                for (LayerReport r : layerReports) items.add(k3j.conform.Invariants.layer(r));
                for (var x : sweptParts) items.add(k3j.conform.Invariants.experts(ExpertLayerReport.of(x.layer(), x.kind(), x.to() - x.from(), x.experts(), x.seconds())));
                for (var b : blocks) items.add(b.item());
                if (greedyBlock != null) items.add(greedyBlock.item());
                verdict = k3j.conform.Invariants.decide(k3j.conform.Invariants.Mode.FLOAT32, items).against(c.dump());
            }
            out.println();
            out.print(verdict.text());
            if (json != null) writeJson(all, sel, judge, verdict);
            if (shardDir != null) {
                // the layers as run, before the causes: the merge reads those from every shard's layers together
                var asRun = new k3j.fleet.Judged(raw.stream().map(withBoundary).toList(), sweepText, sweptParts, blocks, greedyBlock);
                k3j.fleet.ShardFolder.finish(shardDir, shardId, identity, part, asRun,
                        k3j.fleet.TensorDigests.of(k3j.io.CheckpointIndex.open(model).tensors(), k3j.fleet.ShardFolder.judges(part)));
                out.println("shard " + shardId + " complete: " + shardDir.resolve(k3j.fleet.ShardFolder.DONE));
            }
        } catch (k3j.plan.PlanRefused e) {
            err.println(e.getMessage());
            return e.refusal().exitCode();
        } catch (ConformException | k3j.trunk.TrunkException | k3j.model.ForwardException | k3j.io.CheckpointException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
        out.printf(Locale.ROOT, "wall time %.1f s%n", (System.nanoTime() - t0) / 1e9);
        return verdict.green() ? ExitCode.OK : ExitCode.RUNTIME;
    }

    /** --lossy: the graded table of layers and logits, the exit by the thresholds; --json holds the whole table. */
    private int graded(Conform judge, List<Integer> sel, PrintWriter out) throws IOException {
        k3j.conform.LossyReport r = ApiInternals.get().lossy(judge, sel);
        out.print(r.text(lossy.maxKl, lossy.minTop1));
        if (json != null) {
            var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
            AtomicWrite.string(json, "--json", mapper.writerWithDefaultPrettyPrinter().writeValueAsString(java.util.Map.of("lossy", r.json(lossy.maxKl, lossy.minTop1))));
        }
        return r.verdict(lossy.maxKl, lossy.minTop1).green() ? ExitCode.OK : ExitCode.RUNTIME;   // conform exits 1 for any verdict that is not green (docs/semantics.md §10.11)
    }

    /** The model under the memory flags' plan: the preset line, the plan block and what was opened printed as they come. */
    private Conform planned(Path model, Conform.Options o, PrintWriter out, PrintWriter err) {
        ReferenceDump dump = ReferenceMatch.locate(model, o.reference(), o.dumpDirs());
        k3j.plan.MemInfo mem = RunCommand.memInfo();
        MemoryOptions.Budgets budgets = memory.budgets(mem, out::println);
        return ApiInternals.get().conform(model, dump, memory.plan(budgets), o.withMemory(new k3j.api.MachineMemory(mem.totalBytes(), mem.availableBytes())).withReport(s -> {
            out.print(s);
            out.flush();
        }, err::println));
    }

    /** The end-of-run lines: the expert cache's counters (when the experts went through it) and the peak RSS against the plan's TOTAL. */
    static void report(PrintWriter out, Conform judge) {
        var assembly = ApiInternals.get().assembly(judge);
        var plan = ApiInternals.get().plan(judge);
        if (assembly != null && assembly.cache() != null) {
            var s = assembly.cache().totalStats();
            out.printf(Locale.ROOT, "expert cache: %d requests, %d hits, %d misses, %d evictions, %s read%n", s.requests(), s.hits(), s.misses(), s.evictions(),
                    k3j.plan.Human.bytes(s.bytesRead()));
        }
        k3j.plan.MemInfo.peakRss().ifPresent(p -> out.println("PEAK RSS for the whole run: " + k3j.plan.Human.bytes(p)
                + (plan != null ? " (plan TOTAL " + k3j.plan.Human.bytes(plan.total()) + ")" : "")));
    }

    /** The expert sweep of the selected MoE layers: one line per layer, every failing expert named; returns every layer's report. */
    private static List<ConformReport.Experts> sweep(Conform judge, List<Integer> sel, PrintWriter out, java.util.Map<String, Boolean> judged) {
        out.println();
        out.println("===== EXPERT SWEEP (every routed expert on the dump's probes) =====");
        out.println(ApiInternals.get().conformance(judge).expertSweep().describe());
        long t0 = System.nanoTime();
        int[] checked = {0}, total = {0};
        List<ConformReport.Experts> rs = judge.experts(sel, r -> {
            out.println(r.line());
            for (String e : r.failing()) out.println("    " + e);
            out.flush();
            checked[0] += r.checked();
            total[0] += r.total();
            judged.put("L" + r.layer() + " experts", r.conforms());
        });
        long failed = rs.stream().filter(r -> !r.conforms()).count();
        out.printf(Locale.ROOT, "EXPERTS %d of %d MoE layers conform; experts checked: %d of %d; %.1f s%n", rs.size() - failed, rs.size(), checked[0], total[0], (System.nanoTime() - t0) / 1e9);
        out.println(failed == 0 ? "VERDICT: EVERY EXPERT CONFORMS" : "VERDICT: EXPERTS OF " + failed + " LAYER(S) DO NOT CONFORM");
        return rs;
    }

    /** A shard's expert ranges of the sweep: one line per range, every failing expert named. */
    private static List<k3j.conform.ExpertSweep.Range> sweepRanges(Conformance c, List<k3j.fleet.WorkPlan.ExpertRange> ranges, PrintWriter out, java.util.Map<String, Boolean> judged) {
        out.println();
        out.println("===== EXPERT SWEEP (this shard's expert ranges on the dump's probes) =====");
        out.println(c.expertSweep().describe());
        List<k3j.conform.ExpertSweep.Range> rs = new ArrayList<>();
        for (var x : ranges) {
            var r = c.experts(x.layer(), x.from(), x.to());
            rs.add(r);
            var rep = ExpertLayerReport.of(r.layer(), r.kind(), r.to() - r.from(), r.experts(), r.seconds());
            out.println(x.text() + "  " + rep.line());
            for (ExpertReport e : rep.failing()) out.println("    " + e.message());
            out.flush();
            judged.put("L" + x.layer() + " experts " + x.from() + "-" + (x.to() - 1), rep.conforms());
        }
        return rs;
    }

    /** --candidate A --against B: where the two part, then each one's verdict against the reference. Exit 1 when they part or either does not conform. */
    private int against(PrintWriter out, int workers, List<Path> search) {
        Conform.Options o = Conform.Options.DEFAULTS.withThreads(workers).withReference(ReferenceOption.of(reference), search).withLogits(!noLogits);
        try (Conform a = Conform.candidate(candidate, o); Conform b = Conform.candidate(against, o)) {
            out.println("A         : " + ApiInternals.get().conformance(a).engine());
            out.println("B         : " + ApiInternals.get().conformance(b).engine());
            out.println("reference : " + ApiInternals.get().conformance(a).dump().source() + " (" + ApiInternals.get().conformance(a).dump().producer() + ")");
            k3j.conform.SelfDivergence d = k3j.conform.SelfDivergence.of(ApiInternals.get().conformance(a), ApiInternals.get().conformance(b));
            out.print(d.text());
            boolean bad = d.parting() != null;
            for (Conform c : List.of(a, b)) {
                Conformance cc = ApiInternals.get().conformance(c);
                ConformReport r = c.report(c.layers(scope.select(cc.layerCount()), x -> {}), 0);
                ConformReport.Layer first = r.firstDivergence();
                out.println((c == a ? "A" : "B") + " against the reference: " + r.verdict()
                        + (first != null ? "; FIRST DIVERGENCE: " + first.name() + (first.firstDivergence() != null ? " " + first.firstDivergence() : "") + " " + first.finding().tag() : ""));
                bad |= !r.failing().isEmpty();
            }
            return bad ? ExitCode.RUNTIME : ExitCode.OK;
        }
    }

    /** One elementwise logit block; 1 when it does not conform (a candidate without logits: its missing stage). */
    private static int logits(PrintWriter out, ConformReport.Logits l) {
        out.println();
        if (l.comparison() == null) {
            out.println("===== ELEMENTWISE LOGIT COMPARISON =====");
            out.println(l.missing());
            return 1;
        }
        out.println("===== ELEMENTWISE LOGIT COMPARISON (" + l.comparison().mode() + ") =====");
        out.print(l.text());
        return l.conforms() ? 0 : 1;
    }

    private static int greedy(PrintWriter out, ConformReport.Greedy g) {
        out.println();
        out.println("===== GREEDY GENERATION (incremental) =====");
        if (g.ids() == null) {
            out.println(g.missing());
            return 1;
        }
        out.print(g.text());
        return g.conforms() ? 0 : 1;
    }

    static final String PLAN_LOGITS_FULL = "logits, full recompute", PLAN_LOGITS_INCREMENTAL = "logits, incremental", PLAN_GREEDY = "greedy ids";

    /** What this run judges (--json's run_plan), and what it judged so far, item by item. */
    private final List<String> planned = new ArrayList<>();
    private k3j.fleet.WorkPlan.Part shardPart;
    private final java.util.Map<String, Boolean> judged = new java.util.LinkedHashMap<>();
    private com.fasterxml.jackson.databind.node.ObjectNode runPlan;

    /**
     * Writes --json before the first layer: the run's plan (docs/formats.md §15: a run id, the model or candidate, the
     * reference, every planned item) and its verdict so far, INCOMPLETE naming everything; the end of the run rewrites
     * the file whole. A run interrupted or crashed leaves that INCOMPLETE verdict, never a green one.
     */
    private void startJson(Conform judge, List<Integer> sel, Path model) throws IOException {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        Conformance c = ApiInternals.get().conformance(judge);
        runPlan = mapper.createObjectNode();
        runPlan.put("run", java.util.UUID.randomUUID().toString());
        runPlan.put("model", model == null ? (String) null : model.toString());
        runPlan.put("candidate", candidate == null ? (String) null : candidate.toString());
        runPlan.put("reference", c.dump().source().toString());
        runPlan.put("reference_producer", c.dump().producer());
        for (int l : sel) planned.add("L" + l);
        if (scope.experts && shardPart != null) for (var x : shardPart.experts()) planned.add("L" + x.layer() + " experts " + x.from() + "-" + (x.to() - 1));
        else if (scope.experts) for (int l : c.moeLayers(sel)) planned.add("L" + l + " experts");
        if (judge.hasLogits() && (shardPart == null || shardPart.logits())) planned.addAll(List.of(PLAN_LOGITS_FULL, PLAN_LOGITS_INCREMENTAL, PLAN_GREEDY));
        var items = runPlan.putArray("items");
        planned.forEach(items::add);
        var root = mapper.createObjectNode();
        root.set("run_plan", runPlan);
        root.set("verdict", mapper.valueToTree(referenced(k3j.conform.PlanVerdict.decide(planned, judged, false, true).json(), c.dump())));
        AtomicWrite.string(json, "--json", mapper.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    }

    /** A verdict's JSON naming who computed the reference ("reference: k3j VERSION, not torch" for a dump k3j wrote). */
    private static java.util.Map<String, Object> referenced(java.util.Map<String, Object> verdict, k3j.conform.ReferenceDump dump) {
        var m = new java.util.LinkedHashMap<>(verdict);
        m.put("reference", dump.producer());
        return m;
    }

    /**
     * The --json report: the run's plan and its verdict (docs/formats.md §15), every layer's finding, message, seconds and
     * stage ratios (doubles as computed), and the summary a merge of shards reproduces (docs/formats.md §18).
     */
    private void writeJson(k3j.fleet.Judged all, List<Integer> sel, Conform judge, k3j.conform.Verdict decision) throws IOException {
        var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
        var root = mapper.createObjectNode();
        root.set("run_plan", runPlan);
        root.set("verdict", mapper.valueToTree(referenced(k3j.conform.PlanVerdict.decide(planned, judged, true, true).json(), ApiInternals.get().conformance(judge).dump())));
        k3j.fleet.Judged.putLayers(root.putArray("layers"), all.layers());
        k3j.fleet.Summary.putVerdict(root, all, sel, decision, List.of());
        k3j.plan.MemInfo.peakRss().ifPresent(p -> root.put("peak_rss_bytes", p));
        if (ApiInternals.get().plan(judge) != null) {
            var plan = root.putObject("plan");
            var p = ApiInternals.get().plan(judge);
            plan.put("total_bytes", p.total());
            plan.put("trunk_streamed", p.trunkStreamed());
            plan.put("trunk_bytes", p.trunk());
            plan.put("model_tables_bytes", p.modelTables());
            plan.put("expert_cache_bytes", p.expertCache());
            plan.put("buffers_bytes", p.buffers() + p.recurrentState() + p.kvCache());
            plan.put("jvm_bytes", p.jvm().bytes());
            plan.put("jvm_heap_max_bytes", p.jvm().heapMax());
            if (ApiInternals.get().assembly(judge) != null && ApiInternals.get().assembly(judge).trunk() != null && ApiInternals.get().assembly(judge).trunk().binding() != null) {
                var b = ApiInternals.get().assembly(judge).trunk().binding();
                var tb = root.putObject("trunk_binding");
                tb.put("check", b.mode().flag());
                tb.put("shards_changed_since_pack", b.changedShards().size());
                tb.put("tensors_hashed", b.tensorsHashed());
                tb.put("bytes_hashed", b.bytesHashed());
            }
            if (ApiInternals.get().assembly(judge) != null && ApiInternals.get().assembly(judge).cache() != null) {
                var s = ApiInternals.get().assembly(judge).cache().totalStats();
                var cache = root.putObject("expert_cache");
                cache.put("slots", ApiInternals.get().assembly(judge).cache().geometry().slots());
                cache.put("slot_bytes", ApiInternals.get().assembly(judge).cache().geometry().slotBytes());
                cache.put("requests", s.requests());
                cache.put("misses", s.misses());
                cache.put("evictions", s.evictions());
                cache.put("bytes_read", s.bytesRead());
            }
        }
        AtomicWrite.string(json, "--json", mapper.writerWithDefaultPrettyPrinter().writeValueAsString(root));
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    /** --merge ROOT: the shard folders as one run's verdict, or INCOMPLETE. */
    private int merged(PrintWriter out, PrintWriter err) throws IOException {
        if (modelFolder.given() || candidate != null || shard != null || results != null || scope.layers != null || scope.experts || verifyData || lossy.on || chart != null) {
            throw usage("--merge ROOT merges what the shards judged: give no MODEL_DIR, --candidate, --shard, --results, --layers, --experts, --verify-data, --lossy or --chart");
        }
        try {
            new k3j.io.Outputs().input(merge, "the results root (--merge)").input(ReferenceOption.of(reference), "the reference (--reference)").input(digests, "the digest manifest (--digests)").file(json, "--json");
        } catch (IOException e) {
            throw usage(e.getMessage());
        }
        k3j.fleet.Merge m;
        try {
            m = k3j.fleet.Merge.of(merge, MergeReference.finder(ReferenceOption.of(reference), ReferenceSearch.dirs(dumps)),
                    digests == null ? null : k3j.fleet.TensorDigests.read(digests));
        } catch (IOException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.USAGE;
        }
        out.print(m.text());
        if (json != null) AtomicWrite.string(json, "--json", k3j.fleet.ShardFolder.pretty(m.json()));
        out.flush();
        // the one decision: INCOMPLETE (a shard missing, unfinished, foreign; anything planned not judged) exits 3
        return m.verdict().outcome() == k3j.conform.Verdict.Outcome.INCOMPLETE || !m.complete() ? ExitCode.INCOMPLETE : m.verdict().green() ? ExitCode.OK : ExitCode.RUNTIME;
    }

    /** --shard-plan N: the plan every shard of an N-shard run computes, printed; no layer is run. */
    private int shardPlan(PrintWriter out) {
        if (!modelFolder.given() || candidate != null || shard != null || scope.layers != null || lossy.on || verifyData) {
            throw usage("--shard-plan N prints a model's work plan: give MODEL_DIR, and no --candidate, --shard, --layers, --lossy or --verify-data");
        }
        if (shardPlan < 1) throw usage("--shard-plan " + shardPlan + ": give a count of 1 or more");
        Path model = modelFolder.config().getParent();
        var cfg = k3j.config.ConfigReader.read(modelFolder.config());
        var index = k3j.io.CheckpointIndex.open(model);
        ReferenceDump d = ReferenceMatch.locate(model, ReferenceOption.of(reference), ReferenceSearch.dirs(dumps));
        int tokens = d.ids().length, generated = d.generatedIds().length;
        k3j.fleet.WorkPlan plan;
        try {
            plan = k3j.fleet.WorkPlan.of(index.tensors(), cfg, tokens, generated, !noLogits, scope.experts, shardPlan);
        } catch (IllegalArgumentException e) {
            throw usage("--shard-plan " + shardPlan + ": " + e.getMessage());
        }
        out.println("model     : " + model + " (" + cfg.layerCount() + " layers)");
        out.println("reference : " + d.source() + " (" + tokens + " ids, " + generated + " generated)");
        out.print(plan.table());
        return ExitCode.OK;
    }

    /** --shard I/N or auto (with --results), or null; refused with --layers, --candidate and --lossy. */
    private k3j.fleet.ShardId shardId() {
        if (results != null && shard == null) throw usage("--results ROOT is where a shard writes: give --shard I/N (or auto) too");
        if (shard == null) return null;
        if (results == null) throw usage("--shard " + shard + ": give --results ROOT, the shared folder every shard writes into");
        if (candidate != null || !modelFolder.given()) throw usage("--shard splits k3j's run of a model: give MODEL_DIR, not --candidate");
        if (scope.layers != null) throw usage("--shard picks the shard's layers from the work plan: not with --layers");
        if (lossy.on || verifyData) throw usage("--shard judges the float32 conformance: not with --lossy or --verify-data");
        try {
            return k3j.fleet.ShardId.parse(shard, System.getenv());
        } catch (IllegalArgumentException e) {
            throw usage(e.getMessage());
        }
    }

}
