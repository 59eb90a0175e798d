package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import k3j.compare.LogitParity;
import k3j.compare.LossyLogits;
import k3j.compare.LossyReport;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.dump.Budget;
import k3j.dump.CandidateDump;
import k3j.dump.LogitFile;
import k3j.dump.ReferenceDump;
import k3j.io.AtomicWrite;
import k3j.provider.ProviderResponse;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;
import k3j.verdict.Invariants;
import k3j.verdict.Verdict;
import k3j.verdict.VerdictLimits;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 compare-logits FILE --reference REF [--config CONFIG.json | --model DIR] [--position N] [--lossy]}: one
 * engine's logits against the reference's, at one position or at every position both hold. REF is a reference dump
 * (its budget, ids and positions) or a plain logit vector (raw float32 [V], .npy [V] or [T, V]) whose vocabulary and
 * budget come from the config. By the float32 budget: max |diff|, its ratio to max |ref| against the logits budget,
 * argmax, top-10 overlap, correlation, the first rank at which the orders part. With {@code --lossy}: the KL-divergence
 * grading of {@link LossyLogits}, judged by {@code --max-kl} / {@code --min-top1}.
 */
@Command(name = "compare-logits", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Compare a logit file (--dump-logits raw float32, .npy, or a candidate dump) against a reference's logits: a reference dump, "
                + "or a plain logit vector with --config/--model.",
        footer = {"Formats (docs/formats.md): exactly V raw little-endian float32 (the C engine's and k3j's --dump-logits: the last prompt position);",
                ".npy '<f4' C order, [V] or [T, V]; a candidate dump (its logits [T, V]). Wrong length or a non-finite value is refused.",
                "Without a dump (REF a raw or .npy vector): V and the budget come from the config (eps32 1.2e-7 * sqrt(E) * 50, E the hidden width); the rows are",
                "compared as they are. NOT checked then: the prompt (a plain vector does not say which ids it followed), any layer, the greedy",
                "ids, which weights the reference was made from; a dump checks its own budget constants and gives each row its position and id.",
                "--lossy: KL(ref||cand) of the softmax per position, same top-1, dp of the reference's top token, its rank; mean/median/p99/max",
                "KL, %% same top-1, RMS dp (llama.cpp's KL-divergence convention); exit by --max-kl (mean KL, nats) and --min-top1 (percent), default 0.5 and 25.",
                "A candidate dump is checked as conform --candidate checks it, and every logits array it holds is judged. Any value non-finite or",
                "past 16x max|reference| is refused (docs/semantics.md section 10.11).",
                "Exit codes, the verdict's own: 0 within budget and the same argmax (--lossy: within the thresholds), 1 not,",
                "2 bad usage, a refused file or a refused value, 3 INCOMPLETE (an array the reference has is missing)."})
final class CompareLogitsCommand implements Callable<Integer> {
    @Parameters(index = "0", arity = "0..1", paramLabel = "FILE", description = "the engine's logits (with a provider response: or --run)")
    Path file;

    @Option(names = "--reference", required = true, paramLabel = "REF",
            description = "the reference: a dump (folder, .tar.gz, .tar.xz), or a plain logit vector (raw float32 [V], .npy [V] or [T, V]) with --config or --model")
    Path reference;

    @CommandLine.ArgGroup(exclusive = true)
    Shape shape;

    static final class Shape {
        @Option(names = "--config", paramLabel = "CONFIG.json", description = "the model's config.json: V and the logits budget for a plain reference vector")
        Path config;

        @Option(names = "--model", paramLabel = "DIR", description = "the model folder: its config.json, as --config")
        Path model;

        Path configFile() {
            return config != null ? config : model.resolve("config.json");
        }
    }

    @Option(names = "--position", paramLabel = "N", description = "the position the file's vector is for (or the row of [T, V] files to compare); "
            + "default: every row when FILE holds as many rows as the reference, else the last prompt position of a dump")
    Integer position;

    @CommandLine.Mixin
    LossyOptions lossy;

    @Option(names = "--request", paramLabel = "REQUEST.json", description = "with a provider response as --reference: the request it answered "
            + "(chat messages, rendered with the model's chat template; or a completions prompt, text or ids)")
    Path request;

    @Option(names = "--prompt-ids", split = ",", paramLabel = "IDS", description = "with a provider response: the prompt as ids, instead of --request")
    List<Integer> promptIds;

    @Option(names = "--run", description = "with a provider response: the candidate is k3j's own teacher-forced run of the prompt and the completion on --model")
    boolean run;

    @Option(names = "--tok", paramLabel = "DIR", description = "with a provider response: the tokenizer folder, when it is not the --model folder")
    Path tok;

    @Option(names = "--json", paramLabel = "FILE", description = "write the figures (and with --lossy the whole per-position table) as JSON")
    Path json;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /** The reference rows and what they are. */
    private record Reference(String what, int vocab, int rows, float[] logits, int[] ids, int promptLength, Budget budget, ReferenceDump source) {
        boolean dump() {
            return ids != null;
        }
    }

    @Override
    public Integer call() throws IOException {
        PrintWriter out = spec.commandLine().getOut();
        outputs();
        if (!Files.exists(reference)) throw usage(reference + ": no such file or folder (--reference): check the path");
        if (file != null && !Files.exists(file)) throw usage(file + ": no such file or folder (FILE): check the path");
        if (ProviderResponse.isResponseName(reference)) return ProviderComparison.run(this, out, this::usage);
        if (request != null || promptIds != null || run || tok != null || lossy.maxDlogprob != null) {
            throw usage("--request, --prompt-ids, --run, --tok and --max-dlogprob grade against a provider response (--reference RESPONSE.json)");
        }
        if (file == null) throw usage("name the logit file to compare (FILE)");
        lossy.validate(spec.commandLine());
        Double maxKl = lossy.maxKl, minTop1 = lossy.minTop1;
        Reference ref = reference();
        if (position != null && ref.dump() && (position < 0 || position >= ref.rows())) {
            throw usage("--position " + position + " is outside the reference's 0.." + (ref.rows() - 1));
        }
        Map<String, LogitFile> files = files(ref);
        if (files.isEmpty()) {   // a candidate holding no logits: nothing judged (INCOMPLETE, as conform says), never a refusal or a pass
            Verdict none = Invariants.decide(lossy.on ? Invariants.Mode.LOSSY : Invariants.Mode.FLOAT32, notHeld);
            if (ref.source() != null) none = none.against(ref.source().producer(), ref.source().promptId());
            out.println("file                  : " + file + " (a candidate holding no logits array)");
            out.print(none.text());
            if (json != null) AtomicWrite.string(json, "--json", new com.fasterxml.jackson.databind.ObjectMapper().writerWithDefaultPrettyPrinter()
                    .writeValueAsString(Map.of("file", file.toString(), "decision", none.json())));
            return none.exitCode();
        }
        LogitFile f = files.values().iterator().next();
        int v = ref.vocab();
        // which rows: one position, or every row both files hold
        int first, rows;
        float[] want;
        boolean all = position == null && f.rows() == ref.rows();
        if (all) {
            first = 0;
            rows = ref.rows();
            want = ref.logits();
        } else {
            int pos;
            if (position != null) pos = position;
            else if (ref.dump()) pos = ref.promptLength() - 1;
            else throw usage("the reference " + reference + " holds " + ref.rows() + " rows and " + file + " " + f.rows() + ": say which position with --position");
            int span = Math.max(ref.rows(), f.rows());
            if (pos < 0 || pos >= span) throw usage("--position " + pos + " is outside the reference's 0.." + (span - 1));
            if (f.rows() != 1 && ref.rows() != 1 && f.rows() != ref.rows()) {
                throw usage("refused: " + file + " holds " + f.rows() + " rows; the reference has " + ref.rows() + " positions (a file holds one vector or all of them)");
            }
            first = pos;
            rows = 1;
            int r = ref.rows() == 1 ? 0 : pos;   // a plain one-vector reference is the position the user names
            want = Arrays.copyOfRange(ref.logits(), r * v, (r + 1) * v);
        }
        Map<String, float[]> got = new LinkedHashMap<>();
        files.forEach((mode, lf) -> got.put(mode, all ? lf.values() : lf.rows() == 1 ? lf.values() : lf.row(first)));
        int[] ids = new int[rows];
        int promptLength = rows + 1;   // no generated span to check unless the dump's ids say which rows produced its greedy ids
        if (ref.dump()) {
            ids = Arrays.copyOfRange(ref.ids(), first, first + rows);   // a dump's rows are its positions
            if (rows == ref.rows()) promptLength = ref.promptLength();
        } else {
            Arrays.fill(ids, -1);
        }
        out.println("file                  : " + file + " (" + f.format() + ")" + (files.size() > 1 ? ", arrays " + String.join(", ", files.keySet()) : ""));
        out.println("reference             : " + ref.what() + (rows == 1 ? ", position " + first + (ref.dump() ? " (after id " + ids[0] + "; prompt " + ref.promptLength() + " ids)" : "")
                : ", all " + rows + " positions"));
        if (!ref.dump()) out.println("not checked           : the prompt, the layers, the greedy ids (a plain reference vector says nothing of them)");
        out.printf(Locale.ROOT, "vocab                 : %d%n", v);
        Map<String, Object> report = new LinkedHashMap<>();
        report.put("file", file.toString());
        report.put("file_format", f.format());
        report.put("reference", ref.what());
        report.put("reference_is_dump", ref.dump());
        if (ref.source() != null) report.put("reference_producer", ref.source().producer());
        report.put("first_position", first);
        report.put("positions", rows);
        report.put("vocab", v);
        report.put("budget_width", ref.budget().width("logits"));
        Verdict verdict;
        if (lossy.on) {
            LossyReport l = LossyReport.ofLogits(got, want, rows, v, first);
            out.print(l.text(maxKl, minTop1));
            report.put("lossy", l.json(maxKl, minTop1));
            verdict = l.verdict(maxKl, minTop1);
            if (!notHeld.isEmpty()) {   // an array the candidate does not hold is not judged: the graded ones are one item of the whole
                List<Invariants.Item> whole = new ArrayList<>(List.of(Invariants.of("the graded logits", verdict)));
                whole.addAll(notHeld);
                verdict = Invariants.decide(Invariants.Mode.LOSSY, whole);
            }
        } else {
            List<Invariants.Item> items = new ArrayList<>(notHeld);
            for (var en : got.entrySet()) {
                String what = "logits (" + en.getKey() + ")";
                String bad = Invariants.implausible(what, en.getValue(), want, VerdictLimits.shipped());
                if (bad != null) {
                    out.println("REFUSED (invariant 1): " + bad);
                    items.add(Invariants.Item.refused(what, bad));
                    continue;
                }
                LogitParity.Result r = LogitParity.compare("compare-logits", en.getValue(), want, ids, promptLength, v, ref.budget());
                if (got.size() > 1) out.println("===== " + what + " =====");
                text(out, r, en.getValue(), want, rows);
                items.add(LogitParity.item(what, r, true));
                if (!report.containsKey("max_abs_diff")) {
                    report.put("max_abs_diff", r.maxAbsDiff());
                    report.put("ratio_to_budget", r.ratioToBudget());
                    report.put("budget", r.budget());
                    report.put("argmax_equal", r.argmaxEqual());
                }
                if (r.finding() == Finding.BINDING_ERROR && ref.dump() && rows == 1) {
                    int[] prompt = Arrays.copyOf(ref.ids(), ref.promptLength());
                    out.println("check the prompt first: logits this far apart are most often for another prompt or position. The reference's are for the "
                            + prompt.length + " ids " + Arrays.stream(prompt).mapToObj(String::valueOf).collect(java.util.stream.Collectors.joining(","))
                            + " at position " + first + (position == null ? " (the last; --position N picks another row)" : "")
                            + "; k3 MODEL --ids <those ids> --gen 1 --dump-logits FILE writes that vector");
                }
            }
            out.println("budget                : " + ref.budget().source() + ", width " + ref.budget().width("logits") + " (the hidden width each logit is a reduction over)");
            verdict = Invariants.decide(Invariants.Mode.FLOAT32, items);
            if (ref.source() != null) verdict = verdict.against(ref.source().producer(), ref.source().promptId());
            out.print(verdict.text());
        }
        report.put("verdict", verdict.outcome().words().toLowerCase(Locale.ROOT));
        report.put("decision", verdict.json());
        if (json != null) {
            AtomicWrite.string(json, "--json", new com.fasterxml.jackson.databind.ObjectMapper().writerWithDefaultPrettyPrinter().writeValueAsString(report));
            out.println("json: " + json);
        }
        return verdict.exitCode();
    }

    /** --json checked before any work: never one of this command's own inputs (by file identity), a link or a special file. */
    private void outputs() {
        if (json == null) return;
        try {
            k3j.io.Outputs o = new k3j.io.Outputs().input(file, "the candidate (FILE)").input(reference, "the reference (--reference)")
                    .input(request, "the request (--request)").input(tok, "a tokenizer file (--tok)");
            if (shape != null) o.input(shape.config, "the config (--config)").input(shape.model, "a file of the model folder (--model)");
            o.file(json, "--json");
        } catch (IOException e) {
            throw usage(e.getMessage());
        }
    }

    /** The float32 figures of one array. */
    private static void text(PrintWriter out, LogitParity.Result r, float[] got, float[] want, int rows) {
        if (rows == 1) {
            LogitParity.Position p = r.positions().getFirst();
            int rank = LogitParity.firstDifferingRank(got, want);
            out.printf(Locale.ROOT, "max |diff|            : %.6e%n", r.maxAbsDiff());
            out.printf(Locale.ROOT, "relative to max|ref|  : %.6e   (budget %.2e, %.3gx budget)%n", r.relToMaxRef(), r.budget(), r.ratioToBudget());
            out.printf(Locale.ROOT, "mean |diff|           : %.6e%n", r.meanAbsDiff());
            out.printf(Locale.ROOT, "argmax                : engine %d (%.6f), reference %d (%.6f)%s%n", p.engineArgmax(), got[p.engineArgmax()],
                    p.referenceArgmax(), want[p.referenceArgmax()], p.argmaxEqual() ? "" : "   <- differs");
            out.printf(Locale.ROOT, "top-10 overlap        : %d/10%n", p.top10Overlap());
            out.printf(Locale.ROOT, "correlation           : %.9f%n", r.correlation());
            out.println("first differing rank  : " + (rank < 0 ? "none (the same order over all " + want.length + " ids)" : rank + " (0 = the argmax)"));
        } else {
            out.print(r.text());
        }
    }

    /**
     * The file's logits arrays by mode. A candidate dump (folder, manifest.json, .safetensors, .npz) is read and checked
     * exactly as {@code conform --candidate} does (invariants 2 and 3: made from this reference, only the reference's
     * arrays, the reference's layers), and every logits array it holds is judged; it needs a reference dump.
     */
    /** The logits arrays the reference defines that a candidate does not hold: not judged. */
    private final List<Invariants.Item> notHeld = new ArrayList<>();

    private Map<String, LogitFile> files(Reference ref) {
        Map<String, LogitFile> m = new LinkedHashMap<>();
        try {
            if (LogitFile.isCandidate(file)) {
                if (!ref.dump()) throw usage("refused: " + file + " is a candidate dump; it is judged against the reference dump it was made from (--reference DUMP), not a plain vector");
                CandidateDump c = CandidateDump.open(LogitFile.candidateRoot(file));
                c.requireFits(ref.source());
                c.requireReferenceLayers(ref.source());
                for (boolean incremental : new boolean[] {false, true}) {
                    float[] values = c.logits(incremental);
                    String mode = incremental ? "incremental" : "full recompute";
                    if (values != null) m.put(mode, LogitFile.ofCandidate(c, values, ref.vocab()));
                    else notHeld.add(Invariants.Item.notJudged("logits (" + mode + ")", Finding.MISSING_STAGE.tag() + " the candidate holds no such array"));
                }
                return m;
            }
            m.put("file", LogitFile.read(file, ref.vocab()));
            return m;
        } catch (LogitFile.LogitFileException | ConformException e) {
            throw usage("refused: " + e.getMessage());
        }
    }

    /** A dump (its budget and ids), or a plain vector read for the config's vocabulary. */
    private Reference reference() {
        boolean isDump = Files.isDirectory(reference) || ReferenceDump.isArchiveName(reference);
        ModelConfig config = null;
        if (shape != null) {
            try {
                config = ConfigReader.read(shape.configFile());
            } catch (ConfigException e) {
                throw usage(e.getMessage());
            }
        }
        if (isDump) {
            ReferenceDump d;
            try {
                d = ReferenceDump.open(reference);
                int v = d.shape("logits")[1];
                if (config != null && config.vocabSize() != v) {
                    throw usage("the dump " + reference + " holds logits of V = " + v + ", the config " + shape.configFile() + " says vocab_size " + config.vocabSize());
                }
                int[] ids = d.ids();
                float[] logits = d.f32("logits");
                if (logits.length != (long) ids.length * v) throw usage("refused: the dump's logits hold " + logits.length + " floats, " + ids.length + " x " + v + " expected");
                return new Reference(d.source() + " (reference dump; " + d.producer() + ")", v, ids.length, logits, ids, d.promptIds().length, d.budget(), d);
            } catch (ConformException e) {
                throw usage(e.getMessage());
            }
        }
        if (config == null) {
            throw usage(reference + " is not a reference dump: a plain logit vector needs --config CONFIG.json or --model DIR (its vocab_size and the logits budget)");
        }
        int v = config.vocabSize();
        LogitFile r;
        try {
            r = LogitFile.read(reference, v);
        } catch (LogitFile.LogitFileException | ConformException e) {
            throw usage("refused reference: " + e.getMessage());
        }
        // invariant 6: a logit is a reduction over the hidden width E (the LM head's dot product), not over V
        int e = config.hiddenSize();
        Budget b = new Budget(Budget.DEFAULT_EPS32, Budget.DEFAULT_FACTOR, Map.of("logits", e),
                "the default constants at the config's hidden width E = " + e + " (" + shape.configFile() + "; no dump)");
        return new Reference(reference + " (" + r.format() + ", plain: no dump)", v, r.rows(), r.values(), null, 0, b, null);
    }

    CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }
}
