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
import k3j.api.internal.ApiInternals;
import k3j.compare.Charts;
import k3j.compare.Conformance;
import k3j.compare.ExpertLayerReport;
import k3j.compare.LayerReport;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.io.AtomicWrite;
import k3j.verdict.ConformException;
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
                "Exit codes, the verdict's own: 0 CONFORMS (or WITHIN THE THRESHOLDS), 1 DOES NOT CONFORM (or a runtime failure),",
                "2 REFUSED (or bad usage), 3 INCOMPLETE: something planned was not judged (with --merge: a shard missing, unfinished or foreign)."})
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

    @Option(names = "--digests", paramLabel = "FILE", description = "with --merge (required): the model's per-tensor digest manifest, made once "
            + "(k3 digest MODEL --out FILE); every shard's tensors must be its")
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
        if (merge != null) {
            if (modelFolder.given() || candidate != null || shard != null || results != null || scope.layers != null || scope.experts || verifyData || lossy.on || chart != null) {
                throw usage("--merge ROOT merges what the shards judged: give no MODEL_DIR, --candidate, --shard, --results, --layers, --experts, --verify-data, --lossy or --chart");
            }
            if (digests == null) throw usage(ConformMerge.NEEDS_DIGESTS);
            try {
                new k3j.io.Outputs().input(merge, "the results root (--merge)").input(ReferenceOption.of(reference), "the reference (--reference)")
                        .input(digests, "the digest manifest (--digests)").file(json, "--json");
            } catch (IOException e) {
                throw usage(e.getMessage());
            }
            return ConformMerge.run(merge, MergeReference.finder(ReferenceOption.of(reference), ReferenceMatch.searchDirs(dumps)), digests, json, out, err);
        }
        if (digests != null) throw usage("--digests FILE is the manifest a merge judges the shards against: give it with --merge ROOT");
        if (shardPlan != null) {
            if (!modelFolder.given() || candidate != null || shard != null || scope.layers != null || lossy.on || verifyData) {
                throw usage("--shard-plan N prints a model's work plan: give MODEL_DIR, and no --candidate, --shard, --layers, --lossy or --verify-data");
            }
            return ConformShardPlan.plan(modelFolder.config(), ReferenceOption.of(reference), ReferenceMatch.searchDirs(dumps), !noLogits, scope.experts, shardPlan, out, this::usage);
        }
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
        List<Path> search = ReferenceMatch.searchDirs(dumps);
        if (verifyData) return ConformShardPlan.verifyData(model, ReferenceOption.of(reference), search, out);
        if (against != null) {
            if (candidate == null) throw usage("--against B compares two candidate dumps: give --candidate A");
            if (lossy.on || scope.experts || json != null || chart != null) throw usage("--against names where two candidates part: not with --lossy, --experts, --json or --chart");
            try {
                return ConformAgainst.run(candidate, against, Conform.Options.DEFAULTS.withThreads(workers).withReference(ReferenceOption.of(reference), search)
                        .withLogits(!noLogits), scope, out);
            } catch (k3j.api.CannotJudge e) {
                return e.getCause() instanceof ConformException ce ? refused(ce, out, err) : runtime(e.getCause(), err);
            } catch (ConformException e) {
                return refused(e, out, err);
            }
        }
        if (scope.experts && candidate != null) throw usage("--experts runs k3j's forward on a model; a candidate dump holds no expert outputs");
        if (candidate != null && memory.given()) throw usage("--trunk, --trunk-gb, --cache-gb and --preset plan k3j's forward: not with --candidate");
        memory.validate();
        if (model != null) scope.check(modelFolder.config());
        lossy.validate(spec.commandLine());
        if (lossy.on && scope.experts) throw usage("--lossy grades layers and logits; --experts judges experts by the float32 budget: not together");
        long t0 = System.nanoTime();
        k3j.verdict.Verdict verdict;
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
            ConformJson jsonFile = json == null ? null : new ConformJson(json);
            if (jsonFile != null) jsonFile.start(judge, sel, model, candidate, scope.experts, part);
            List<LayerReport> raw = new ArrayList<>();
            List<ConformReport.Layer> layers = judge.layers(sel, r -> {
                raw.add(ApiInternals.get().layer(r));
                out.println(raw.getLast().progressLine());
                out.flush();
            });
            if (layers.stream().anyMatch(l -> !l.conforms())) {
                out.println("layers over budget, each with the cause read from every selected layer together (docs/semantics.md §10.10):");
                for (ConformReport.Layer l : layers) if (!l.conforms()) out.println(l.line());
            }
            ConformReport report = judge.report(layers, (System.nanoTime() - t0) / 1e9);
            int failed = report.failing().size();
            List<LayerReport> layerReports = layers.stream().map(ApiInternals.get()::layer).toList();
            java.util.function.Function<LayerReport, k3j.fleet.Judged.Layer> withBoundary = r -> new k3j.fleet.Judged.Layer(r, c.dump().layer(r.layer()).boundary());
            List<k3j.fleet.Judged.Layer> judgedLayers = layerReports.stream().map(withBoundary).toList();
            out.print(k3j.fleet.Summary.layers(new k3j.fleet.Judged(judgedLayers, null, List.of(), List.of(), null), sel, report.layerSeconds()));
            List<ConformReport.Experts> swept = List.of();
            List<k3j.fleet.Judged.Experts> sweptParts = List.of();
            if (scope.experts && part != null) {
                List<k3j.compare.ExpertSweep.Range> ranges = ConformSweep.ranges(c, part.experts(), out);
                sweptParts = ranges.stream().map(x -> new k3j.fleet.Judged.Experts(x.layer(), x.kind(), x.total(), x.from(), x.to(), x.experts(), x.seconds())).toList();
            } else if (scope.experts) {
                swept = ConformSweep.layers(judge, sel, out);
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
                    logits(out, logits.getLast());
                }
                greedy = judge.greedy();
                greedy(out, greedy);
            }
            verdict = ApiInternals.get().verdict(new ConformReport(report.subject(), report.reference(), report.budget(), layers, report.layerSeconds(), swept, logits, greedy,
                    scope.experts && part == null)).against(c.dump().producer(), c.dump().promptId());
            String sweepText = scope.experts ? c.expertSweep().describe() : null;
            List<k3j.fleet.Judged.Block> blocks = logits.stream().map(l -> k3j.fleet.Judged.logits(ApiInternals.get().logits(l), l.missing())).toList();
            k3j.fleet.Judged.Block greedyBlock = greedy == null ? null : k3j.fleet.Judged.greedy(ApiInternals.get().greedy(greedy), greedy.missing());
            var all = new k3j.fleet.Judged(judgedLayers, sweepText, sweptParts, blocks, greedyBlock);
            if (part != null && scope.experts) {
                // a shard's expert ranges are not whole layers: its own verdict judges each range as a whole (the merge joins them)
                List<k3j.verdict.Invariants.Item> items = new ArrayList<>();
                for (LayerReport r : layerReports) items.add(r.item());
                for (var x : sweptParts) items.add(ExpertLayerReport.of(x.layer(), x.kind(), x.to() - x.from(), x.experts(), x.seconds()).item());
                for (var b : blocks) items.add(k3j.compare.Causes.carry(b.item(), k3j.compare.Causes.runCause(layerReports)));
                if (greedyBlock != null) items.add(greedyBlock.item());
                verdict = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, items).against(c.dump().producer(), c.dump().promptId());
            }
            out.println();
            out.print(verdict.text());
            if (jsonFile != null) jsonFile.finish(all, sel, judge, verdict);
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
        } catch (k3j.api.CannotJudge e) {
            return e.getCause() instanceof ConformException ce ? refused(ce, json, out, err) : runtime(e.getCause(), err);
        } catch (ConformException e) {
            return refused(e, json, out, err);
        } catch (k3j.trunk.TrunkException | k3j.model.ForwardException | k3j.io.CheckpointException e) {
            return runtime(e, err);
        }
        out.printf(Locale.ROOT, "wall time %.1f s%n", (System.nanoTime() - t0) / 1e9);
        return verdict.exitCode();
    }

    /** --lossy: the graded table of layers and logits, the exit by the thresholds; --json holds the whole table. */
    private int graded(Conform judge, List<Integer> sel, PrintWriter out) throws IOException {
        k3j.compare.LossyReport r = ApiInternals.get().lossy(judge, sel);
        out.print(r.text(lossy.maxKl, lossy.minTop1));
        if (json != null) {
            var mapper = new com.fasterxml.jackson.databind.ObjectMapper();
            AtomicWrite.string(json, "--json", mapper.writerWithDefaultPrettyPrinter().writeValueAsString(java.util.Map.of("lossy", r.json(lossy.maxKl, lossy.minTop1))));
        }
        return r.verdict(lossy.maxKl, lossy.minTop1).exitCode();
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

    /** One elementwise logit block (a candidate without logits: its missing stage, not judged). */
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

    /**
     * An input refused before anything was graded (another reference or prompt, arrays other than the reference's, a
     * non-finite value): the verdict REFUSED, printed and exited by as every door does; anything else is a runtime failure.
     */
    private static int refused(ConformException e, PrintWriter out, PrintWriter err) {
        return refused(e, null, out, err);
    }

    /** The same, the verdict also written to {@code json} when given (--json holds the verdict printed, never an earlier run's). */
    private static int refused(ConformException e, Path json, PrintWriter out, PrintWriter err) {
        if (e.finding() != k3j.verdict.Finding.REFERENCE_MISMATCH && e.finding() != k3j.verdict.Finding.NON_FINITE) return runtime(e, err);
        err.println("k3: " + e.getMessage());
        k3j.verdict.Verdict v = k3j.verdict.Invariants.decide(k3j.verdict.Invariants.Mode.FLOAT32, List.of(k3j.verdict.Invariants.Item.refused("the input", e.getMessage())));
        if (json != null) {
            try {
                ConformJson.refused(json, v);
            } catch (IOException w) {
                return runtime(w, err);
            }
        }
        out.print(v.text());
        return v.exitCode();
    }

    private static int runtime(Throwable e, PrintWriter err) {
        err.println("k3: " + e.getMessage());
        return ExitCode.RUNTIME;
    }

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
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
