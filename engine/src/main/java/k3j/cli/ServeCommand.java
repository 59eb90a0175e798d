package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import k3j.api.Engine;
import k3j.api.PlannedMemory;
import k3j.api.ServedText;
import k3j.api.Serving;
import k3j.plan.Human;
import k3j.plan.MemInfo;
import k3j.serve.Server;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 serve MODEL_DIR}: the model under the memory plan of {@code k3 run}'s flags, served over HTTP by
 * {@link Server} (OpenAI-compatible) from one continuous batch. It prints {@code listening on http://HOST:PORT}
 * once it accepts requests; SIGTERM or SIGINT refuse new requests, finish those in flight and exit 0.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "OpenAI-compatible server: k3 serve MODEL_DIR [--port N] [--api-key KEY] [--trunk DIR [--preset NAME]] ...",
        footer = "Endpoints: GET /v1/models, POST /v1/completions, POST /v1/chat/completions (stream: server-sent events), GET /health, "
                + "GET /metrics (Prometheus). Exit codes: 0 stopped by SIGTERM/SIGINT after draining, 1 runtime failure, 2 bad request.")
final class ServeCommand implements Callable<Integer> {
    @CommandLine.Mixin
    ModelFolder model;

    @CommandLine.Mixin
    MemoryOptions memory;

    @CommandLine.Mixin
    ThreadsOption threads;

    @Option(names = "--host", paramLabel = "ADDR", defaultValue = "127.0.0.1", description = "address to listen on (default ${DEFAULT-VALUE}: this machine only)")
    String host;

    @Option(names = "--port", paramLabel = "N", defaultValue = "8000", description = "port (default ${DEFAULT-VALUE}); 0 picks a free one, printed on the 'listening on' line")
    int port;

    @Option(names = "--api-key", paramLabel = "KEY", description = "require 'Authorization: Bearer KEY' on every request but /health (compared in constant time)")
    String apiKey;

    @Option(names = "--served-model-name", paramLabel = "NAME", description = "the model's id in /v1/models and requests (default: the folder's name)")
    String name;

    @Option(names = "--max-active", paramLabel = "N", defaultValue = "8", description = "sequences in one step at most (default ${DEFAULT-VALUE})")
    int maxActive;

    @Option(names = "--max-queued", paramLabel = "N", defaultValue = "32", description = "sequences waiting for a slot at most; one more is refused with 429 (default ${DEFAULT-VALUE})")
    int maxQueued;

    @Option(names = "--prefill-chunk", paramLabel = "N", defaultValue = "256", description = "prompt ids of one sequence fed in one step at most (default ${DEFAULT-VALUE})")
    int prefillChunk;

    @Option(names = "--context", paramLabel = "N", defaultValue = "4096", description = "prompt plus generated ids of one sequence at most (default ${DEFAULT-VALUE})")
    int context;

    @Option(names = "--max-body-bytes", paramLabel = "N", defaultValue = "1048576", description = "a request body's bytes at most; more is refused with 413 (default ${DEFAULT-VALUE})")
    long maxBody;

    @Option(names = "--idle-timeout", paramLabel = "SECONDS", defaultValue = "30", description = "a connection that sends nothing this long is closed (default ${DEFAULT-VALUE})")
    double idleTimeout;

    @Option(names = "--request-timeout", paramLabel = "SECONDS", defaultValue = "600", description = "a generation running this long is cancelled, 504 (default ${DEFAULT-VALUE})")
    double requestTimeout;

    @Option(names = "--return-tokens-as-token-ids", description = "logprobs name each token 'token_id:N' rather than by its text (always so without a tokenizer)")
    boolean tokensAsIds;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private CommandLine.ParameterException usage(String msg) {
        return new CommandLine.ParameterException(spec.commandLine(), msg);
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut(), err = spec.commandLine().getErr();
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        Path dir = model.folder();
        model.config();
        if (port < 0 || port > 65535) throw usage("--port must be 0 to 65535, got " + port);
        if (maxActive < 1 || maxQueued < 0 || prefillChunk < 1 || context < 2) throw usage("--max-active, --prefill-chunk must be at least 1, --max-queued at least 0, --context at least 2");
        if (maxBody < 1 || maxBody > Integer.MAX_VALUE - 8) throw usage("--max-body-bytes must be 1 to " + (Integer.MAX_VALUE - 8) + ", got " + maxBody);
        if (!(idleTimeout > 0 && idleTimeout <= 86400) || !(requestTimeout > 0 && requestTimeout <= 86400)) throw usage("timeouts must be above 0 and at most 86400 seconds");
        if (apiKey != null && apiKey.isEmpty()) throw usage("--api-key must not be empty");
        int workers = threads.count();
        MemInfo mem = MemInfo.read();
        MemoryOptions.Budgets budgets = memory.budgets(mem, err::println);
        k3j.api.MachineMemory machine = new k3j.api.MachineMemory(mem.totalBytes(), mem.availableBytes());
        Engine.Options opts = Engine.Options.DEFAULTS.withThreads(workers).plannedFor(context, 0, true)
                .withMemory(machine).withReport(s -> {
                    err.print(s);
                    err.flush();
                }, err::println);
        if (java.nio.file.Files.isRegularFile(dir.resolve(k3j.tokenizer.Tokenizer.RANKS_FILE))) opts = opts.withTokenizer(dir);
        CountDownLatch stop = new CountDownLatch(1);
        String[] signal = {null};
        for (String s : new String[] {"TERM", "INT"}) {
            try {
                sun.misc.Signal.handle(new sun.misc.Signal(s), got -> {
                    signal[0] = "SIG" + got.getName();
                    stop.countDown();
                });
            } catch (IllegalArgumentException e) {
                // the JVM keeps this signal to itself (-Xrs)
            }
        }
        try (Engine engine = Engine.open(dir, memory.plan(budgets), opts)) {
            int ctx = Math.min(context, engine.maxPositions());
            Serving.Limits limits = new Serving.Limits(maxActive, maxQueued, prefillChunk, ctx);
            PlannedMemory planned = Serving.plan(engine, limits);
            err.printf("serving plan: %s for %d slots of %d positions (KV cache %s, recurrent state %s, buffers %s)%n", Human.bytes(planned.totalBytes()),
                    maxActive, ctx + 1, Human.bytes(planned.kvCacheBytes()), Human.bytes(planned.recurrentStateBytes()), Human.bytes(planned.buffersBytes()));
            try (Serving serving = Serving.open(engine, limits, machine)) {
                String id = name != null ? name : dir.toAbsolutePath().normalize().getFileName().toString();
                Server server = Server.start(serving, ServedText.of(engine), new Server.Settings(host, port, id, apiKey, maxBody,
                        Duration.ofMillis(Math.round(idleTimeout * 1000)), Duration.ofMillis(Math.round(requestTimeout * 1000)), ctx, tokensAsIds));
                out.println("listening on " + server.address());
                out.flush();
                err.printf("k3: serving %s (%d ids of context, %d active, %d queued); SIGTERM drains and exits%n", id, ctx, maxActive, maxQueued);
                err.flush();
                stop.await();
                err.println("k3: " + signal[0] + ": refusing new requests, finishing those in flight");
                err.flush();
                boolean all = server.drain(Duration.ofMillis(Math.round(requestTimeout * 1000)));
                err.println(all ? "k3: drained; stopped" : "k3: stopped with requests still in flight after the request timeout");
                return all ? ExitCode.OK : ExitCode.RUNTIME;
            }
        } catch (Engine.OpenException e) {
            return RunCommand.openFailed(e, err);
        }
    }
}
