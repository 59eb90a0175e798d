package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import k3j.io.AtomicWrite;
import k3j.io.StrictJson;
import k3j.probe.Form;
import k3j.probe.Probe;
import k3j.probe.Prompt;
import k3j.probe.Prompts;
import k3j.probe.Reference;
import k3j.probe.Screen;
import k3j.provider.ProviderGrade;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code k3 probe URL (--model DIR | --reference DUMP --tok DIR)}: a live OpenAI-compatible endpoint judged
 * against a reference ({@link Probe}): conformance per prompt and form, and the invariance battery, decided once.
 */
@Command(name = "probe", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Judge a live OpenAI-compatible endpoint serving K3: its logprobs against k3j's (or a reference dump's) per prompt and form, and "
                + "the invariance battery (repeated, alone against inside a batch at every position, after a request sharing its prefix, a long "
                + "prompt against its short prefix, streamed against not, completions against chat).",
        footer = {"Conformance is the provider grade of compare-logits --reference RESPONSE.json (same top-1, |dlogprob| over the server's top-k, KL);",
                "a property holds on equal bits (--nondeterministic NATS: within that many nats, the ids equal). A request that fails, times out or is",
                "rate-limited past its retries, or a form the server does not serve, leaves its case NOT JUDGED and the run INCOMPLETE.",
                "Exit codes: 0 CONFORMS, 1 DOES NOT CONFORM or INCOMPLETE, 2 bad usage or an answer refused (REFUSED)."})
final class ProbeCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "URL", description = "the server's root, http://HOST:PORT (or .../v1)")
    String url;

    @Option(names = "--api-key", paramLabel = "KEY", description = "sent as a bearer token (default: $K3_API_KEY when set)")
    String apiKey;

    @Option(names = "--model-name", paramLabel = "NAME", description = "the model field of every request (default: the model folder's name)")
    String modelName;

    @Option(names = "--model", paramLabel = "DIR", description = "the reference: k3j computing on this model folder under the memory plan")
    Path model;

    @Option(names = "--reference", paramLabel = "DUMP", description = "the reference: a reference dump (its prompt, its logits); needs --tok")
    Path dump;

    @Option(names = "--tok", paramLabel = "DIR", description = "the model's tokenizer folder (default: --model's, when it has one; without one only "
            + "vLLM-style token_id:N names a token, and only the completions form is asked)")
    Path tok;

    @CommandLine.Mixin
    MemoryOptions memory;

    @CommandLine.Mixin
    ThreadsOption threads;

    @Option(names = "--prompts", paramLabel = "FILE", description = "the prompts, one a line: comma-separated ids, or text")
    Path promptsFile;

    @Option(names = "--random", paramLabel = "N", description = "N prompts drawn from --seed (default 3 when neither --prompts nor a dump is given)")
    Integer random;

    @Option(names = "--seed", paramLabel = "S", defaultValue = "1", description = "the seed of --random and of the battery's own tails (default 1)")
    long seed;

    @Option(names = "--prompt-ids", paramLabel = "N", defaultValue = "8", description = "ids per --random prompt (default 8)")
    int promptIds;

    @Option(names = "--gen", paramLabel = "N", defaultValue = "8", description = "greedy tokens asked per request (default 8)")
    int gen;

    @Option(names = "--top", paramLabel = "K", defaultValue = "5", description = "alternatives asked per token, 1..20 (default 5)")
    int top;

    @Option(names = "--forms", paramLabel = "LIST", defaultValue = "completions,chat", description = "the forms asked: completions, chat or both (default both)")
    String forms;

    @Option(names = "--batch", paramLabel = "N", defaultValue = "4", description = "requests sent at once by the batch property (default 4)")
    int batch;

    @Option(names = "--long-gen", paramLabel = "N", defaultValue = "16", description = "tokens the first prompt is asked for by the long-prompt property; its first "
            + "half is appended to make the long prompt: make the first prompt's length plus N/2 exceed the server's prefill chunk (default 16)")
    int longGen;

    @Option(names = "--nondeterministic", paramLabel = "NATS", description = "the server declares itself non-deterministic: a property holds when the ids are "
            + "equal and every logprob within NATS (default: equal bits)")
    Double budget;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "120", description = "one request's bound (default 120)")
    int timeout;

    @Option(names = "--retries", paramLabel = "N", defaultValue = "4", description = "retries of a 429 or 503, after its Retry-After (default 4)")
    int retries;

    @Option(names = "--max-requests", paramLabel = "N", defaultValue = "5000", description = "the run's bound on requests (default 5000)")
    int maxRequests;

    @Option(names = "--min-top1", paramLabel = "PERCENT", description = "conformance: the smallest share of same top-1 (default 90 when no threshold is given)")
    Double minTop1;

    @Option(names = "--max-dlogprob", paramLabel = "NATS", description = "conformance: the largest mean |dlogprob| (default 0.1 when no threshold is given)")
    Double maxDlogprob;

    @Option(names = "--max-kl", paramLabel = "NATS", description = "conformance: the largest mean top-k KL")
    Double maxKl;

    @Option(names = "--json", paramLabel = "FILE", description = "write the verdict (and every case) as JSON")
    Path json;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    @Override
    public Integer call() throws IOException, InterruptedException {
        PrintWriter out = spec.commandLine().getOut();
        if ((model == null) == (dump == null)) throw usage("name the reference: --model DIR (k3j computes it) or --reference DUMP (one of them)");
        if (dump != null && tok == null) throw usage("--reference DUMP needs --tok DIR: the model's tokenizer (token identity)");
        if (dump != null && memory.given()) throw usage("the memory flags plan k3j's own run: they go with --model, not --reference");
        if (promptsFile != null && random != null) throw usage("--prompts FILE or --random N, not both");
        if (dump != null && (promptsFile != null || random != null)) throw usage("a reference dump holds the logits of its own prompt only: no --prompts or --random");
        if (minTop1 != null && !(minTop1 >= 0 && minTop1 <= 100) || maxDlogprob != null && !(maxDlogprob >= 0) || maxKl != null && !(maxKl >= 0)) {
            throw usage("--min-top1 is a percentage 0..100; --max-dlogprob and --max-kl are numbers >= 0");
        }
        if (budget != null && !(budget > 0 && Double.isFinite(budget))) throw usage("--nondeterministic takes a positive number of nats");
        Set<Form> asked = EnumSet.noneOf(Form.class);
        try {
            for (String f : forms.split(",")) asked.add(Form.of(f));
        } catch (IllegalArgumentException e) {
            throw usage("--forms: " + e.getMessage());
        }
        if (dump != null) asked.remove(Form.CHAT);
        URI uri;
        try {
            uri = URI.create(url);
            if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme()) || uri.getHost() == null) throw new IllegalArgumentException("not http(s)://HOST");
        } catch (IllegalArgumentException e) {
            throw usage("URL " + url + ": " + e.getMessage());
        }
        boolean anyGiven = minTop1 != null || maxDlogprob != null || maxKl != null;
        ProviderGrade.Thresholds t = anyGiven ? new ProviderGrade.Thresholds(minTop1, maxDlogprob, maxKl)
                : new ProviderGrade.Thresholds(ProviderGrade.Thresholds.DEFAULT_MIN_TOP1, ProviderGrade.Thresholds.DEFAULT_MAX_MEAN_DLOGPROB, null);
        String key = apiKey != null ? apiKey : System.getenv("K3_API_KEY");
        String name = modelName != null ? modelName : (model != null ? model : dump).toAbsolutePath().normalize().getFileName().toString();
        Probe.Settings s;
        try {
            s = new Probe.Settings(uri, key, name, asked, gen, top, batch, longGen, budget == null ? 0 : budget, Duration.ofSeconds(timeout), retries, maxRequests, t, seed);
        } catch (IllegalArgumentException e) {
            throw usage(e.getMessage());
        }
        if (timeout < 1) throw usage("--timeout must be at least 1 s");
        Reference ref;
        try {
            if (model != null) {
                k3j.plan.MemInfo mem = RunCommand.memInfo();
                k3j.api.Plan plan = memory.plan(memory.budgets(mem, out::println));
                Path tokDir = tok != null ? tok : java.nio.file.Files.isRegularFile(model.resolve(k3j.tokenizer.Tokenizer.RANKS_FILE)) ? model : null;
                if (tokDir == null && asked.contains(Form.CHAT)) {
                    throw usage(model + " holds no tokenizer: the chat form needs one (--tok DIR), or leave it out with --forms completions");
                }
                ref = Reference.model(model, tokDir, plan, threads.count(), Math.max(promptIds, 4096) + longGen + gen, text -> {
                    out.print(text);
                    out.flush();
                });
            } else {
                ref = Reference.dump(dump, tok);
            }
        } catch (k3j.api.Engine.OpenException e) {
            if (!e.planRefused()) throw usage("the reference: " + e.getMessage());
            out.println("refused: " + e.getMessage());
            return ExitCode.RUNTIME;
        } catch (CommandLine.ParameterException e) {
            throw e;
        } catch (RuntimeException e) {
            throw usage("the reference: " + e.getMessage());
        }
        try (ref) {
            List<Prompt> prompts;
            try {
                if (dump != null) {
                    k3j.dump.ReferenceDump d = k3j.dump.ReferenceDump.open(dump);
                    prompts = List.of(new Prompt("p1", d.promptIds(), null, null));
                } else if (promptsFile != null) {
                    prompts = Prompts.file(promptsFile, ref.tokenizer(), ref.vocab());
                } else {
                    if (random != null && (random < 1 || random > Prompts.MAX_PROMPTS)) throw usage("--random must be 1.." + Prompts.MAX_PROMPTS);
                    if (promptIds < 1 || promptIds > Prompts.MAX_IDS) throw usage("--prompt-ids must be 1.." + Prompts.MAX_IDS);
                    prompts = Prompts.random(random == null ? 3 : random, seed, promptIds, ref.tokenizer(), ref.vocab());
                }
            } catch (IllegalArgumentException e) {
                throw usage(e.getMessage());
            }
            out.println("probe       : " + uri + " (model \"" + name + "\")");
            out.println("reference   : " + ref.describe());
            out.println("prompts     : " + prompts.size() + (promptsFile != null ? " from " + promptsFile : dump != null ? " (the dump's)" : " drawn from seed " + seed)
                    + ", " + gen + " greedy tokens each, top " + top + " alternatives; forms " + String.join(", ", asked.stream().map(Form::word).toList()));
            out.println("properties  : " + (s.budget() == 0 ? "equal bits" : "ids equal and logprobs within " + s.budget() + " nats (declared non-deterministic)")
                    + "; batch of " + batch + "; conformance: " + t.text() + (anyGiven ? "" : " (the defaults)"));
            out.flush();
            long t0 = System.nanoTime();
            Probe.Result r = Probe.run(s, ref, prompts);
            out.print(Screen.text(r));
            out.printf(java.util.Locale.ROOT, "probe time  : %.1f s wall%n", (System.nanoTime() - t0) / 1e9);
            if (json != null) {
                Map<String, Object> m = new LinkedHashMap<>(r.verdict().json());
                m.put("server", uri.toString());
                m.put("reference", ref.describe());
                m.put("cases", r.cases().stream().map(c -> Map.of("kind", c.kind().name(), "name", c.name(), "status", c.item().status().name(), "why", c.item().why(),
                        "detail", c.detail())).toList());
                m.put("left_out", r.leftOut());
                m.put("requests", r.requests());
                AtomicWrite.string(json, "--json", StrictJson.MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(m));
                out.println("json: " + json);
            }
            return r.verdict().exitCode();
        }
    }
}
