package k3j.fuzz;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import k3j.cache.CacheSimulator;
import k3j.cache.CacheTrace;
import k3j.chat.ChatException;
import k3j.chat.Transcript;
import k3j.cli.K3;
import k3j.compare.Conformance;
import k3j.config.ConfigException;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.dump.LogitFile;
import k3j.dump.ReferenceDump;
import k3j.io.CheckpointException;
import k3j.io.CheckpointIndex;
import k3j.io.CheckpointSummary;
import k3j.state.Binding;
import k3j.state.StateException;
import k3j.state.StateFile;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.TokenizerException;
import k3j.trunk.TrunkException;
import k3j.trunk.TrunkManifest;
import k3j.verdict.ConformException;
import picocli.CommandLine;

/**
 * The fuzz targets: each feeds untrusted bytes to one reader exactly as a user's file would reach it (written
 * to a scratch file first) and accepts only two outcomes: a valid result, or that reader's own refusal
 * ({@link CheckpointException}, {@link ConfigException}, {@link ConformException}, {@link TrunkException},
 * picocli's {@link CommandLine.ParameterException}, {@link ChatException}, {@link TokenizerException},
 * {@link StateException}, {@link LogitFile.LogitFileException}, a provider response's {@code RefusedException}, a trace's {@link IOException}). Anything else escaping (an IllegalArgumentException, an
 * IndexOutOfBounds, an OutOfMemoryError) is a finding. The gate bounds each input's time and allocation
 * ({@link Limits}). {@link Target} runs any of them as a Jazzer command-line target for {@code ci/fuzz}.
 */
public final class FuzzTargets {
    private FuzzTargets() {}

    /** The targets by name (ci/fuzz and the gate use these names). */
    public static final Map<String, Consumer<byte[]>> ALL = Map.ofEntries(
            Map.entry("safetensors", (Consumer<byte[]>) FuzzTargets::safetensors),
            Map.entry("config", (Consumer<byte[]>) FuzzTargets::config),
            Map.entry("index", (Consumer<byte[]>) FuzzTargets::index),
            Map.entry("dump", (Consumer<byte[]>) FuzzTargets::dump),
            Map.entry("trunk", (Consumer<byte[]>) FuzzTargets::trunk),
            Map.entry("candidate", (Consumer<byte[]>) FuzzTargets::candidate),
            Map.entry("cli", (Consumer<byte[]>) FuzzTargets::cli),
            Map.entry("history", (Consumer<byte[]>) FuzzTargets::history),
            Map.entry("tokenizer", (Consumer<byte[]>) FuzzTargets::tokenizer),
            Map.entry("state", (Consumer<byte[]>) FuzzTargets::state),
            Map.entry("logits", (Consumer<byte[]>) FuzzTargets::logits),
            Map.entry("trace", (Consumer<byte[]>) FuzzTargets::trace),
            Map.entry("provider", (Consumer<byte[]>) FuzzTargets::provider),
            Map.entry("shardplan", (Consumer<byte[]>) FuzzTargets::shardPlan),
            Map.entry("sharddone", (Consumer<byte[]>) FuzzTargets::shardDone),
            Map.entry("shardresults", (Consumer<byte[]>) FuzzTargets::shardResults),
            Map.entry("merge", (Consumer<byte[]>) FuzzTargets::merge));

    /** A safetensors file: the header reader, then the summary {@code k3 inspect} prints (it sizes per-layer strings). */
    public static void safetensors(byte[] data) {
        Path f = Scratch.file("x.safetensors", data);
        try {
            CheckpointSummary.of(CheckpointIndex.open(f));
        } catch (CheckpointException refused) {
            // a clean refusal
        }
    }

    /** A config.json, validated in full. */
    public static void config(byte[] data) {
        try {
            ConfigReader.read(Scratch.file("config.json", data)).summary();
        } catch (ConfigException refused) {
            // a clean refusal
        }
    }

    /** A model.safetensors.index.json beside one valid shard. */
    public static void index(byte[] data) {
        Path dir = Scratch.indexDir();
        Scratch.write(dir.resolve(CheckpointIndex.INDEX_FILE), data);
        try {
            CheckpointIndex.open(dir);
        } catch (CheckpointException refused) {
            // a clean refusal
        }
    }

    /** A dump manifest over the 93-layer oracle's arrays, checked against that oracle's config as a run would. */
    public static void dump(byte[] data) {
        Path dir = Scratch.dumpDir();
        Scratch.write(dir.resolve("manifest.json"), data);
        try {
            ReferenceDump d = ReferenceDump.open(dir);
            Conformance.check(d, Scratch.miniConfig());
            d.f32("layers.40.attn_out");
        } catch (ConformException refused) {
            // a clean refusal
        }
    }

    /**
     * A one-file candidate (a zip is read as .npz, anything else as .safetensors), checked against the 93-layer
     * oracle's reference as {@code k3 conform --candidate} does, then its first listed array read.
     */
    public static void candidate(byte[] data) {
        boolean zip = data.length >= 2 && data[0] == 'P' && data[1] == 'K';
        Path f = Scratch.file(zip ? "x.npz" : "x.safetensors", data);
        try {
            k3j.dump.CandidateDump c = k3j.dump.CandidateDump.open(f);
            c.checkAgainst(Scratch.miniReference());
            c.stages(0, Scratch.miniReference().ids().length);
            c.logits(false);
        } catch (ConformException refused) {
            // a clean refusal
        }
    }

    /** A trunk.json beside a 64 KiB trunk.bin. */
    public static void trunk(byte[] data) {
        Path dir = Scratch.trunkDir();
        Scratch.write(dir.resolve(TrunkManifest.JSON), data);
        try {
            TrunkManifest.read(dir);
        } catch (TrunkException refused) {
            // a clean refusal
        }
    }

    /** A k3 command line: the input split at NUL bytes into arguments, parsed and (for a run) its flags checked; nothing runs. */
    public static void cli(byte[] data) {
        List<String> args = new ArrayList<>();
        int from = 0;
        for (int i = 0; i <= data.length; i++) {
            if (i == data.length || data[i] == 0) {
                args.add(new String(data, from, i - from, StandardCharsets.UTF_8));
                from = i + 1;
            }
        }
        try {
            K3.checkArguments(args.toArray(String[]::new));
        } catch (CommandLine.ParameterException refused) {
            // a clean refusal
        }
    }

    /** A chat history (--history FILE.jsonl), read as a chat reads it, and rendered for the model. */
    public static void history(byte[] data) {
        try {
            Transcript h = Transcript.read(Scratch.file("history.jsonl", data));
            h.sha256();
            // what is saved reads back as the same messages, an interrupted reply's mark included
            if (!Transcript.read(Scratch.file("again.jsonl", h.toJsonl())).messages().equals(h.messages())) {
                throw new IllegalStateException("a history read back from its own save differs");
            }
        } catch (ChatException refused) {
            // a clean refusal
        }
    }

    /**
     * A tokenizer directory: the first byte chooses the file the rest replaces (even: tiktoken.model beside the
     * tiny model's tokenizer_config.json; odd: tokenizer_config.json beside its tiktoken.model); then a short text
     * is encoded and decoded.
     */
    public static void tokenizer(byte[] data) {
        Path dir = Scratch.tokenizerDir();
        boolean ranks = data.length == 0 || (data[0] & 1) == 0;
        byte[] rest = data.length == 0 ? data : java.util.Arrays.copyOfRange(data, 1, data.length);
        Scratch.write(dir.resolve(ranks ? "tiktoken.model" : "tokenizer_config.json"), rest);
        Scratch.write(dir.resolve(ranks ? "tokenizer_config.json" : "tiktoken.model"), Scratch.tokenizerFile(ranks ? "tokenizer_config.json" : "tiktoken.model"));
        try {
            Tokenizer t = Tokenizer.load(dir);
            int[] ids = t.encode("hello <|im_end|> wörld".getBytes(StandardCharsets.UTF_8), true);
            t.decode(ids);
        } catch (TokenizerException refused) {
            // a clean refusal
        }
    }

    /** A state file (--load-state), sized from its header as a run sizes it and loaded into the tiny model's state. */
    public static void state(byte[] data) {
        Path f = Scratch.file("s.k3state", data);
        Scratch.Tiny tiny = Scratch.tiny();
        try {
            int n = StateFile.idCount(f, 4096, "the fuzz target allows");
            StateFile.load(f, tiny.binding(), tiny.forward().newState(n + 8));
        } catch (StateException refused) {
            // a clean refusal
        }
    }

    /** A logit file for compare-logits (raw float32 or .npy) against the 93-layer oracle's vocabulary. */
    public static void logits(byte[] data) {
        try {
            LogitFile.read(Scratch.file("logits.npy", data), 160);
        } catch (LogitFile.LogitFileException | ConformException refused) {
            // a clean refusal
        }
    }

    private static k3j.tokenizer.Tokenizer tinyTokenizer;

    /** A hosted API's response with logprobs (compare-logits), its tokens mapped through the tiny oracle's tokenizer. */
    public static void provider(byte[] data) {
        try {
            k3j.provider.ProviderResponse r = k3j.provider.ProviderResponse.read(Scratch.file("response.json", data));
            synchronized (FuzzTargets.class) {
                if (tinyTokenizer == null) tinyTokenizer = k3j.tokenizer.Tokenizer.load(Scratch.repo("oracle-fixtures/tiny-k3"));
            }
            k3j.provider.ProviderGrade.ids(r, tinyTokenizer, 256);
        } catch (k3j.provider.ProviderResponse.RefusedException refused) {
            // a clean refusal
        }
    }

    /** A shard folder's plan.json (docs/formats.md §18.3) as the merge reads it: a state and a reason, never an escape. */
    public static void shardPlan(byte[] data) {
        Path dir = Shards.folder("plan");
        Scratch.write(dir.resolve(k3j.fleet.ShardFolder.PLAN), data);
        k3j.fleet.ShardFolder.read(dir);
    }

    /** A finished shard's done.json over a valid plan and results. */
    public static void shardDone(byte[] data) {
        Path dir = Shards.finished("done");
        Scratch.write(dir.resolve(k3j.fleet.ShardFolder.DONE), data);
        k3j.fleet.ShardFolder.read(dir);
    }

    /** A shard's results.json, its completion marker rewritten to name these bytes (so the results reader is reached). */
    public static void shardResults(byte[] data) {
        Path dir = Shards.finished("results");
        Shards.results(dir, data);
        k3j.fleet.ShardFolder.read(dir);
    }

    /**
     * The merge of a one-shard run whose results are {@code data} (the marker naming them), its coverage from the tiny
     * oracle's reference: a verdict or INCOMPLETE, never an escape, and never CONFORMS over a layer the reference
     * holds and the results do not.
     */
    public static void merge(byte[] data) {
        Path dir = Shards.finished("merge");
        Shards.results(dir, data);
        try {
            k3j.fleet.Merge m = k3j.fleet.Merge.of(dir.getParent(), sha -> Shards.reference(), new k3j.fleet.TensorDigests(new java.util.TreeMap<>()));
            if (m.verdict().green() && m.judgedLayers().size() != Shards.reference().layerCount()) {
                throw new IllegalStateException("a merge passed judging " + m.judgedLayers() + " of the reference's " + Shards.reference().layerCount() + " layers");
            }
        } catch (IOException refused) {
            // a clean refusal
        }
    }

    /** Shard folders for the shard targets: a one-shard run of the tiny oracle, planned over its every layer. */
    static final class Shards {
        private static ReferenceDump reference;

        static synchronized ReferenceDump reference() {
            if (reference == null) reference = ReferenceDump.open(Scratch.repo("reference-dumps/tiny-k3"));
            return reference;
        }

        static k3j.fleet.WorkPlan.Part part() {
            List<Integer> all = new ArrayList<>();
            for (int l = 0; l < reference().layerCount(); l++) all.add(l);
            return new k3j.fleet.WorkPlan.Part(0, all, false, 0, 0);
        }

        static k3j.fleet.Identity identity() {
            return new k3j.fleet.Identity("0".repeat(64), reference().manifestSha256(), "0".repeat(64), 1, "logits=false experts=false", part().text());
        }

        /** An empty shard folder under its own root. */
        static Path folder(String name) {
            try {
                Path root = Scratch.ROOT.resolve("shards-" + name);
                Path dir = root.resolve("shard-0-of-1");
                if (Files.exists(dir)) try (var s = Files.list(dir)) {
                    for (Path f : s.toList()) Files.delete(f);
                }
                return Files.createDirectories(dir);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** A folder as a shard leaves it: plan, (empty) results and marker, each valid. */
        static Path finished(String name) {
            Path dir = folder(name);
            try {
                k3j.fleet.ShardFolder.start(dir.getParent(), new k3j.fleet.ShardId(0, 1), identity(), part(), dir);
                k3j.fleet.ShardFolder.finish(dir, new k3j.fleet.ShardId(0, 1), identity(), part(), new k3j.fleet.Judged(List.of(), null, List.of(), List.of(), null), new k3j.fleet.TensorDigests(new java.util.TreeMap<>()));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return dir;
        }

        /** {@code data} as the results, and the marker's results_sha256 rewritten to name them. */
        static void results(Path dir, byte[] data) {
            try {
                Scratch.write(dir.resolve(k3j.fleet.ShardFolder.RESULTS), data);
                var done = (com.fasterxml.jackson.databind.node.ObjectNode) k3j.io.StrictJson.MAPPER.readTree(Files.readAllBytes(dir.resolve(k3j.fleet.ShardFolder.DONE)));
                done.put("results_sha256", k3j.fleet.Identity.sha256(data));
                Scratch.write(dir.resolve(k3j.fleet.ShardFolder.DONE), k3j.fleet.ShardFolder.pretty(done).getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** An expert trace (sim-cache), checked against the released model's layers and experts, and replayed at one size. */
    public static void trace(byte[] data) {
        try {
            int[] pairs = CacheTrace.readPairs(Scratch.file("expert_trace.bin", data), 93, l -> l >= 1, 896, "the released model");
            new CacheSimulator(pairs).row("17 slots", 17, 16, true);
        } catch (IOException refused) {
            // a clean refusal
        }
    }

    // ---------------------------------------------------------------------------------------------
    // the Jazzer command-line entry point (ci/fuzz)

    /** {@code --target_class} of ci/fuzz: the target named by the system property {@value #PROPERTY}. */
    public static final class Target {
        public static final String PROPERTY = "k3j.fuzz.target";
        private static String name;
        private static Consumer<byte[]> run;

        public static void fuzzerInitialize() {
            name = System.getProperty(PROPERTY);
            run = ALL.get(name);
            if (run == null) throw new IllegalArgumentException("-D" + PROPERTY + " must be one of " + new java.util.TreeSet<>(ALL.keySet()) + ", got " + name);
            warmUp(name);
        }

        public static void fuzzerTestOneInput(byte[] data) {
            Limits.check(name, data, run);
        }
    }

    /**
     * Runs a target once over its seeds before fuzzing starts (Jazzer calls {@code fuzzerInitialize} outside the
     * per-input timeout): the first input otherwise pays for instrumenting every class it loads.
     */
    static void warmUp(String target) {
        Consumer<byte[]> run = ALL.get(target);
        try (var files = Files.list(Scratch.repo("conformance/src/test/resources/k3j/gates/FuzzGateInputs/" + target))) {
            for (Path f : files.toList()) {
                try {
                    run.accept(Files.readAllBytes(f));
                } catch (RuntimeException | Error | IOException e) {
                    // a finding shows up again when the fuzzer replays the seed; warming up only loads classes
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Where the targets write their inputs: one scratch folder per JVM, fixtures copied in once. */
    static final class Scratch {
        private static final Path ROOT = create();
        private static Path indexDir, dumpDir, trunkDir;
        private static ModelConfig mini;
        private static Path tokenizerDir;
        private static Tiny tiny;

        /** The tiny model, bound once: a forward to size states and the binding a state must carry. */
        record Tiny(k3j.model.Forward forward, Binding binding) {}

        static synchronized Tiny tiny() {
            if (tiny == null) {
                Path dir = repo("oracle-fixtures/tiny-k3");
                ModelConfig cfg = ConfigReader.read(dir.resolve("config.json"));
                CheckpointIndex index = CheckpointIndex.open(dir);
                k3j.model.Model m = k3j.model.Model.open(index, cfg, -1);
                tiny = new Tiny(m.forward(k3j.kernels.Workers.of(1)), Binding.of(cfg, cfg.layerCount(), index));
            }
            return tiny;
        }

        static synchronized Path tokenizerDir() {
            if (tokenizerDir == null) {
                try {
                    tokenizerDir = Files.createDirectories(ROOT.resolve("tok"));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
            return tokenizerDir;
        }

        static byte[] tokenizerFile(String name) {
            try {
                return Files.readAllBytes(repo("oracle-fixtures/tiny-k3/" + name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        private static ReferenceDump miniReference;

        private static Path create() {
            try {
                Path shm = Path.of("/dev/shm");
                Path p = Files.isDirectory(shm) && Files.isWritable(shm) ? Files.createTempDirectory(shm, "k3j-fuzz") : Files.createTempDirectory("k3j-fuzz");
                p.toFile().deleteOnExit();
                return p;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        static Path file(String name, byte[] data) {
            Path f = ROOT.resolve(name);
            write(f, data);
            return f;
        }

        static void write(Path f, byte[] data) {
            try {
                Files.write(f, data);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        static synchronized Path indexDir() {
            if (indexDir == null) indexDir = copyOne(repo("oracle-fixtures/tiny-k3"), "index", "model-00001-of-00002.safetensors");
            return indexDir;
        }

        static synchronized Path dumpDir() {
            if (dumpDir == null) dumpDir = copyAll(repo("reference-dumps/mini-k3-93"), "dump");
            return dumpDir;
        }

        static synchronized Path trunkDir() {
            if (trunkDir == null) {
                trunkDir = ROOT.resolve("trunk");
                try {
                    Files.createDirectories(trunkDir);
                    Files.write(trunkDir.resolve(TrunkManifest.BIN), new byte[64 << 10]);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
            return trunkDir;
        }

        static synchronized ReferenceDump miniReference() {
            if (miniReference == null) miniReference = ReferenceDump.open(repo("reference-dumps/mini-k3-93"));
            return miniReference;
        }

        static synchronized ModelConfig miniConfig() {
            if (mini == null) mini = ConfigReader.read(repo("oracle-fixtures/mini-k3-93/config.json"));
            return mini;
        }

        private static Path copyOne(Path from, String to, String name) {
            try {
                Path d = Files.createDirectories(ROOT.resolve(to));
                Files.copy(from.resolve(name), d.resolve(name));
                return d;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        private static Path copyAll(Path from, String to) {
            try (var s = Files.list(from)) {
                Path d = Files.createDirectories(ROOT.resolve(to));
                for (Path p : s.toList()) Files.copy(p, d.resolve(p.getFileName()));
                return d;
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        /** The repository root: -Dk3.root, else the nearest parent holding oracle-fixtures/. */
        static Path repo(String relative) {
            String prop = System.getProperty("k3.root", "");
            Path root = prop.isBlank() ? null : Path.of(prop);
            for (Path p = Path.of("").toAbsolutePath(); root == null && p != null; p = p.getParent()) {
                if (Files.isDirectory(p.resolve("oracle-fixtures"))) root = p;
            }
            if (root == null) throw new IllegalStateException("cannot find the k3j root: set -Dk3.root");
            Path f = root.resolve(relative);
            if (!Files.exists(f)) throw new IllegalStateException("gate data missing: " + f);
            return f;
        }
    }
}
