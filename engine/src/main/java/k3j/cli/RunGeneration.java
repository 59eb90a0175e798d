package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import k3j.api.internal.ApiInternals;
import k3j.cache.CacheStats;
import k3j.cache.ExpertCache;
import k3j.io.AtomicWrite;
import k3j.model.Assembly;
import k3j.model.Forward;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.trunk.TrunkStats;
import k3j.trunk.TrunkStream;

/**
 * {@code k3 run} over an opened engine, once its flags are checked ({@link RunCommand}): the STEP table as the tokens
 * come (docs/semantics.md §7.5), the end-of-run output (§7.6), --out (§7.7), --dump-logits (§7.8), the exit code
 * (§7.9); or, with --tf-check, teacher forcing, and with --chat, the chat loop.
 */
final class RunGeneration {
    /** What the text options resolved to, for the generation step. */
    record Session(k3j.tokenizer.Tokenizer tokenizer, k3j.chat.Transcript history, k3j.sample.Sampler.Settings sampling, k3j.chat.Thinking thinking) {}

    private final RunCommand run;
    private final Session session;
    /** o: the run report (stderr or --report); err: errors; stdout: the output alone (the text, or the ids). */
    private final PrintWriter o, err, stdout;
    private final List<k3j.api.Serving.TokenLogprob> logprobEntries = new ArrayList<>();
    /** The signal that stopped the generation ("SIGINT", "SIGTERM"), or null. */
    private String interrupted;

    RunGeneration(RunCommand run, Session session, PrintWriter o, PrintWriter err) {
        this.run = run;
        this.session = session;
        this.o = o;
        this.err = err;
        this.stdout = run.spec.commandLine().getOut();
    }

    /** The run's banner, before the model is opened: the model, the prompt or chat, the sampling, the preset, the KV line. */
    void banner(Path modelDir, int promptLength, MemoryOptions.Budgets budgets, String kvLine) {
        o.println("Kimi K3, Java (k3j), released checkpoint layout");
        o.println("  model    : " + modelDir);
        if (run.text.chat) {
            o.printf("  chat     : %d message(s) in the history%s; each reply at most %d tokens%n", session.history().size(),
                    run.text.loadState != null ? ", continuing the state in " + run.text.loadState : "", run.gen);
        } else {
            o.printf("  prompt   : %d tokens, generating at most %d (%s)%n", promptLength, run.gen, run.incremental ? "incremental" : "full recompute");
        }
        o.println("  sampling : " + samplingLine(session.sampling(), session.tokenizer()));
        if (budgets.presetName() != null) {
            o.printf(Locale.ROOT, "  preset   : %s (trunk %.2f GB / expert cache %.2f GB)%n", budgets.presetName(), budgets.trunkGb(), budgets.cacheGb());
        }
        if (kvLine != null) o.println(kvLine);
    }

    /** Every sampling setting, and where generation stops. */
    private String samplingLine(k3j.sample.Sampler.Settings s, k3j.tokenizer.Tokenizer tok) {
        String how = s.greedy() ? "greedy (temperature 0)"
                : String.format(Locale.ROOT, "temperature %s, top-p %s, top-k %d, seed %d", s.temperature(), s.topP(), s.topK(), s.seed());
        if (run.specDraft > 0) how += ", speculative drafts of up to " + Math.min(run.specDraft, k3j.model.Speculative.MAX_DRAFT);
        if (run.text.chat) return how + "; a reply stops at the end of its message";
        int eos = eosId(tok);
        return how + (run.ignoreEos ? "; --ignore-eos: all " + run.gen + " tokens" : eos >= 0 ? "; stops at " + k3j.api.Engine.EOS + " (id " + eos + ")"
                : "; no end-of-sequence stop (ids without --tok)");
    }

    private static int eosId(k3j.tokenizer.Tokenizer tok) {
        return tok == null ? -1 : tok.addedId(k3j.api.Engine.EOS).orElse(-1);
    }

    /** Generates (or, with --tf-check or --chat, runs those) and prints the end of the run; returns the exit code. */
    int run(k3j.api.Engine engine, int[] promptIds) throws IOException {
        int rc = ExitCode.OK;
        k3j.api.Generated g = null;
        String failure = null;
        Assembly rt = ApiInternals.get().assembly(engine);
        Forward forward = ApiInternals.get().forward(engine);
        ExpertCache cache = rt.cache();
        TrunkStream stream = rt.trunk();
        int bound = rt.layers();
        try {
            if (run.tfCheck) return teacherForcing(engine, promptIds);
            if (run.text.chat) return chat(engine);
            k3j.api.State from = null;
            if (run.incremental && run.text.loadState != null) {
                try {
                    from = engine.loadState(run.text.loadState, promptIds.length + run.gen + 1);
                } catch (k3j.api.StateRefused e) {
                    err.println("k3: " + e.getMessage());
                    return ExitCode.USAGE;
                }
                o.printf("resumed %d positions from %s; this prompt continues them%n", from.positions(), run.text.loadState);
            }
            k3j.sample.Sampler.Settings s = session.sampling();
            k3j.api.Settings settings = new k3j.api.Settings(new k3j.api.Sampling(s.temperature(), s.topP(), s.topK(), s.seed()), run.gen, !run.ignoreEos, run.incremental, run.specDraft);
            int eos = run.ignoreEos ? -1 : engine.eos();
            int fedLength = (from != null ? from.pending().length : 0) + promptIds.length;
            StepTable table = new StepTable();
            long[] trunkReadBefore = {stream != null ? stream.stats().readNanos() : 0};
            double[] expertReadSeconds = {0};
            if (cache != null) cache.resetStep();
            Streamed shown = new Streamed(stdout, ApiInternals.get().tokenizer(engine), eos);
            try (StopSignals signals = new StopSignals(line -> {
                err.println(line);
                err.flush();
            })) {
                o.println(StepTable.HEADER);
                o.println(StepTable.RULE);
                o.flush();
                k3j.api.TokenListener progress = (step, id, secs) -> {
                    if (forward.expertDrops() == 0) shown.token(id);   // from the first drop on the ids are corrupt: never shown
                    CacheStats cs = cache != null ? cache.stepStats() : CacheStats.ZERO;
                    boolean last = step == run.gen - 1 || (eos >= 0 && id == eos);
                    if (cache != null && !last) cache.resetStep();   // the last step's counters stay for the final-step report
                    long trunkRead = stream != null ? stream.stats().readNanos() : 0;
                    double io = (trunkRead - trunkReadBefore[0]) / 1e9 + cs.readSeconds();
                    trunkReadBefore[0] = trunkRead;
                    expertReadSeconds[0] += cs.readSeconds();
                    int fedNow = run.incremental ? (step == 0 ? fedLength : 1) : fedLength + step;
                    o.println(table.add(new StepTable.Row(step, id, fedNow, secs, 100 * cs.hitRate(), cs.bytesRead(), io)));
                    o.flush();
                };
                g = run.logprobs == null ? engine.generate(from, promptIds, settings, progress, signals::requested)
                        : engine.generate(from, promptIds, settings, progress, signals::requested, run.logprobs, logprobEntries::add);
                if (g.stop() == k3j.api.Generated.Stop.INTERRUPTED) {
                    interrupted = signals.name();
                    rc = signals.exitCode();
                }
                if (g.speculation() != null) {
                    var sr = g.speculation();
                    o.printf(Locale.ROOT, "speculative (--spec %d): %d verifying forwards, %d ids drafted, %d accepted (%.1f%%)%n",
                            sr.draftLimit(), sr.verifications(), sr.drafted(), sr.accepted(), 100 * sr.acceptance());
                }
            } catch (k3j.api.RunFailed e) {
                failure = e.getMessage();
                rc = e.invalid() ? ExitCode.RUN_INVALID : ExitCode.RUNTIME;
            } catch (InternalError e) {
                // a memory-mapped shard that shrank under the run faults inside a kernel: name the file, never a stack trace
                failure = MappedShards.describeFault(rt.index(), e);
                rc = ExitCode.RUN_INVALID;
            }
            shown.end();
            o.println(table.footer());
            if (interrupted != null) {
                o.printf("stopped: interrupted (%s) after step %d: %d of %d tokens generated, kept below and in --out%n", interrupted, g.ids().length - 1, g.ids().length, run.gen);
            }
            if (g != null) {
                o.println("generated ids: " + ids(g.ids()));
                if (g.text() != null) o.println("generated text: " + g.text());
                if (run.text.saveState != null && g.state() != null) {
                    engine.saveState(run.text.saveState, g.state());
                    o.printf("saved the state (%d positions) to %s%n", g.state().positions(), run.text.saveState);
                }
                if (run.dumpLogits != null && g.firstLogits() != null) {
                    float[] l = g.firstLogits();
                    ByteBuffer b = ByteBuffer.allocate(4 * l.length).order(ByteOrder.LITTLE_ENDIAN);
                    b.asFloatBuffer().put(l);
                    AtomicWrite.bytes(run.dumpLogits, "--dump-logits", b.array());
                    o.printf("wrote %s (%d float32 logits)%n", run.dumpLogits, l.length);
                }
            }
            if (g != null && g.stop() == k3j.api.Generated.Stop.END_OF_SEQUENCE && rc == ExitCode.OK && forward.expertDrops() == 0) {
                o.printf("stopped at %s after %d of %d tokens%n", k3j.api.Engine.EOS, g.ids().length, run.gen);
            }
            long peak = MemInfo.peakRss().orElse(0);
            o.printf("PEAK RSS for the whole run: %s   <- quote this, not the plan%n", Human.bytes(peak));
            o.printf("layers completed: %d/%d; routed expert drops: %d%n%n", forward.layersCompleted(), bound, forward.expertDrops());
            if (cache != null) o.print(cache.report(false));
            TrunkStats ts = stream != null ? stream.stats() : null;
            CacheStats total = cache != null ? cache.totalStats() : null;
            if (run.out != null) {
                RunJson.write(run.out, g, promptIds, bound, forward.layersCompleted(), forward.expertDrops(),
                        total != null ? total.bytesRead() : rt.model().experts().bytesRead(), ts != null ? ts.bytesRead() : 0, peak, rt.tables(), settings, eos,
                        stream != null ? stream.binding() : null, run.logprobs == null ? null : logprobEntries);
                o.println("wrote " + run.out);
            }
            if (run.dumpCacheTrace != null) {
                Files.createDirectories(run.dumpCacheTrace);
                o.println(engine.saveCacheTrace(run.dumpCacheTrace));
            }
            double wall = table.seconds(), trunkSecs = ts != null ? ts.readNanos() / 1e9 : 0;
            o.printf(Locale.ROOT, "I/O share of wall clock: %.1f%%  (trunk %.2f s + experts %.2f s + model tables %.2f s of %.2f s)%n",
                    wall > 0 ? 100 * (trunkSecs + expertReadSeconds[0]) / wall : 0.0, trunkSecs, expertReadSeconds[0], 0.0, wall);
            o.printf("  both figures are WHOLE-RUN totals over %d steps%n", table.rows().size());
            if (wall > 0 && trunkSecs + expertReadSeconds[0] > wall) {
                o.println("  (over 100%: reads on the reader threads overlapped compute)");
            }
            if (total != null) {
                o.printf(Locale.ROOT, "  experts, whole run: %s read | %d of %d requests retained in RAM (%.2f%%) | %d evictions%n",
                        Human.bytes(total.bytesRead()), Math.max(0, total.requests() - total.evictions()), total.requests(),
                        total.requests() == 0 ? 0.0 : 100.0 * Math.max(0, total.requests() - total.evictions()) / total.requests(), total.evictions());
                o.println("  retained = requests - evictions: a request whose expert was not evicted since it was last read was served from RAM;");
                o.println("  the per-step CACHE HIT column counts the batch prefetch as hits, so it is near 100% at every cache size.");
            }
            if (ts != null) o.print(ts.report());
            if (rc == ExitCode.RUN_INVALID && forward.expertDrops() == 0) {
                err.println("RUN INVALID: " + failure + ". No token was produced after it.");
            } else if (rc == ExitCode.RUN_INVALID || forward.expertDrops() > 0) {
                err.println("RUN INVALID: " + forward.expertDrops() + " routed expert load(s) failed and were dropped from the MoE sum. "
                        + "The token ids above are CORRUPT. (" + failure + ")");
                rc = ExitCode.RUN_INVALID;
            } else if (failure != null) {
                err.println("forward pass failed: " + failure + "; aborting.");
            }
        } finally {
            o.flush();
            err.flush();
        }
        return rc;
    }

    /** The chat loop over this run's engine. */
    private int chat(k3j.api.Engine engine) throws IOException {
        k3j.sample.Sampler.Settings s = session.sampling();
        k3j.api.Chat chat = engine.chat(new k3j.api.History(session.history().messages().stream().map(m -> new k3j.api.History.Message(
                        k3j.api.History.Role.valueOf(m.role().name()), m.content(), m.reasoning(), m.interrupted())).toList()),
                session.thinking(), new k3j.api.Sampling(s.temperature(), s.topP(), s.topK(), s.seed()));
        ChatLoop loop = new ChatLoop(chat, run.text, run.gen, System.out, err);
        try {
            if (run.text.loadState != null) loop.resume();
            return loop.run(run.prompt, System.in);
        } catch (k3j.api.StateRefused | k3j.api.ChatRefused | k3j.chat.ChatException e) {
            err.println("k3: " + e.getMessage());
            err.flush();
            return ExitCode.USAGE;
        }
    }

    /** docs/semantics.md §7.1 --tf-check: argmax of every position against the next id, one forward over all ids. */
    private int teacherForcing(k3j.api.Engine engine, int[] ids) throws IOException {
        k3j.api.Engine.Agreement r;
        try {
            r = engine.teacherForcing(ids);
        } catch (k3j.api.RunFailed e) {
            err.println((e.invalid() ? "RUN INVALID: " : "forward pass failed: ") + e.getMessage());
            return e.invalid() ? ExitCode.RUN_INVALID : ExitCode.RUNTIME;
        } catch (InternalError e) {
            err.println("RUN INVALID: " + MappedShards.describeFault(null, e));
            return ExitCode.RUN_INVALID;
        }
        stdout.printf(Locale.ROOT, "teacher forcing: %d/%d positions agree (%.4f)%n", r.matches(), r.positions(), r.fraction());
        stdout.flush();
        if (run.out != null) {
            AtomicWrite.string(run.out, "--out", String.format(Locale.ROOT, "{\"tf_positions\":%d,\"tf_matches\":%d,\"tf_agreement\":%.4f}%n", r.positions(), r.matches(), r.fraction()));
            o.println("wrote " + run.out);
        }
        return ExitCode.OK;
    }

    private static String ids(int[] ids) {
        StringBuilder sb = new StringBuilder();
        for (int id : ids) sb.append(sb.isEmpty() ? "" : ",").append(id);
        return sb.toString();
    }
}
