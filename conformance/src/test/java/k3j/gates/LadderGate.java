package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.cache.CacheGeometry;
import k3j.cache.CacheStats;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertSource;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.harness.Evidence;
import k3j.harness.Heartbeat;
import k3j.harness.Project;
import k3j.io.CheckpointIndex;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.Model;
import k3j.model.Speculative;
import k3j.model.StreamedTables;
import k3j.trunk.Progress;
import k3j.trunk.StreamOptions;
import k3j.trunk.TrunkManifest;
import k3j.trunk.TrunkPacker;
import k3j.trunk.TrunkStats;
import k3j.trunk.TrunkStream;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The memory ladder: the same prompt gives the same tokens AND the same logits, bit for bit, at every memory
 * budget (docs/semantics.md §5.4-5.5, §6). mini-k3-93 is packed into a trunk with the real packer and generated from the
 * dump's prompt (gen 8) with everything resident, then streamed through one ring slot with the smallest
 * expert cache that holds top-k + 1 experts, two slots, a partly pinned trunk, and the whole trunk pinned with
 * a cache that holds every expert, and the ultra preset (one ring slot, the smallest cache, the embedding rows and the LM head
 * read from the checkpoint on demand, the LM head in 7-row chunks); each in incremental and in full-recompute mode. Every rung's ids must
 * equal the dump's greedy ids and every step's logits must have the resident rung's float bits: a streamed
 * layer bound from a stale or reused slot, or a cache that served another expert's bytes, changes them.
 * Each rung also runs the CLI in a child JVM for what only a whole process can measure: its peak RSS (VmHWM).
 * A seeded sampled generation (docs/semantics.md §8.5) picks the same ids, from the same logit bits, on every rung
 * at 2 threads as everything resident at 1 thread.
 */
@Tag("ladder")
@Epic("memory ladder")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class LadderGate {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Consumer<String> QUIET = s -> {};
    private static final int GEN = 8;

    @TempDir
    static Path tmp;

    static Path model;
    static Path trunkDir;
    static ModelConfig config;
    static int[] prompt, greedy;
    static long slot, packed, expertSlot, experts;

    /**
     * One rung: a trunk budget (null: layers resident), ring slots, an expert-cache budget (null: experts resident), and
     * the LM-head chunk of the streamed model tables (null: embedding and LM head resident; the ultra preset streams them).
     */
    record Rung(String name, Long trunkBytes, int ring, Long cacheBytes, Long tableChunk) {
        Rung(String name, Long trunkBytes, int ring, Long cacheBytes) {
            this(name, trunkBytes, ring, cacheBytes, null);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /** What one rung produced in one mode. */
    record Outcome(int[] ids, List<int[]> logitBits, double secondsPerToken, int pinned, int ring, int cacheSlots, long hits,
                   long misses, long trunkBytes, long expertBytes) {}

    record Child(int exit, long peakRss, double secondsPerToken, String tail) {}

    static final Map<String, Outcome> OUTCOMES = new ConcurrentHashMap<>();
    static final Map<String, Child> CHILDREN = new ConcurrentHashMap<>();

    @BeforeAll
    static void packTheTrunk() throws Exception {
        model = Project.fixture("mini-k3-93");
        config = ConfigReader.read(model.resolve("config.json"));
        prompt = ints(Project.dump("mini-k3-93/ids.bin"), GEN, false);
        greedy = ints(Project.dump("mini-k3-93/greedy_ids.bin"), 0, true);
        assertEquals(GEN, greedy.length, "the mini dump's greedy ids");
        CheckpointIndex index = CheckpointIndex.open(model);
        trunkDir = tmp.resolve("trunk");
        TrunkManifest m;
        try (Heartbeat _ = Heartbeat.of("ladder: packing mini-k3-93's trunk")) {
            m = TrunkPacker.pack(index, trunkDir, Progress.silent(), QUIET, null);
        }
        long largest = 0;
        for (long r : m.runSizes()) largest = Math.max(largest, r);
        slot = (largest + 4095) / 4096 * 4096;
        packed = m.packedBytes();
        try (Model probe = Model.open(index, config, -1, false)) {
            long one = probe.experts().locate(probe.experts().probeLayer(), 0).length();
            expertSlot = CacheGeometry.slotBytes(one);
            experts = (long) (config.layerCount() - 1) * config.expertCount();
        }
    }

    /** ids.bin holds prompt + generated: the prompt is all but the last {@code drop} ids. */
    static int[] ints(Path p, int drop, boolean all) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
        int[] v = new int[b.remaining() / 4];
        for (int i = 0; i < v.length; i++) v[i] = b.getInt();
        return all ? v : java.util.Arrays.copyOf(v, v.length - drop);
    }

    static Stream<Rung> rungs() {
        long smallest = (config.topK() + 1) * expertSlot;
        return Stream.of(
                new Rung("everything resident", null, 2, null),
                new Rung("streamed, 1 ring slot, top-k + 1 cache slots", slot, 1, smallest),
                new Rung("streamed, 2 ring slots, top-k + 1 cache slots", 2 * slot, 2, smallest),
                new Rung("partly pinned trunk, 2 slots, 4 x top-k cache slots", 2 * slot + packed / 2, 2, 4L * config.topK() * expertSlot),
                new Rung("trunk pinned, a cache holding every expert", 2 * slot + packed + 93L * 4096, 2, (experts + 8) * expertSlot),
                // 7 LM-head rows per chunk: 23 chunks of the 160-row table, the last one ragged (6 rows)
                new Rung("ultra: tables streamed in 7-row chunks, 1 ring slot", slot, 1, smallest,
                        7L * 2 * config.hiddenSize()));
    }

    // ---------------------------------------------------------------------------------------------

    @ParameterizedTest(name = "{0}")
    @Order(1)
    @MethodSource("rungs")
    @DisplayName("every rung generates the dump's greedy ids with the resident rung's logit bits at every step, incremental and full recompute")
    void aRungGivesTheResidentBits(Rung rung) throws Exception {
        Outcome baseInc = outcome(rungs().findFirst().orElseThrow(), true), baseFull = outcome(rungs().findFirst().orElseThrow(), false);
        Outcome inc = outcome(rung, true), full = outcome(rung, false);
        Child child = child(rung);
        Evidence.parameter("budget", rung.trunkBytes() == null ? "resident" : String.format(Locale.ROOT, "trunk %d B", rung.trunkBytes()));
        Evidence.parameter("slots", inc.ring());
        Evidence.parameter("pinned layers", inc.pinned());
        Evidence.parameter("cache slots", inc.cacheSlots() == 0 ? "resident" : String.valueOf(inc.cacheSlots()));
        Evidence.parameter("hits/misses", inc.hits() + "/" + inc.misses());
        Evidence.parameter("bytes read", inc.trunkBytes() + inc.expertBytes());
        Evidence.parameter("s/token", inc.secondsPerToken());
        Map<String, Object> j = new LinkedHashMap<>();
        j.put("rung", rung.name());
        j.put("trunk_budget_bytes", rung.trunkBytes());
        j.put("ring", inc.ring());
        j.put("pinned_layers", inc.pinned());
        j.put("cache_budget_bytes", rung.cacheBytes());
        j.put("cache_slots", inc.cacheSlots());
        j.put("incremental", summary(inc));
        j.put("full_recompute", summary(full));
        j.put("cli_peak_rss_bytes", child.peakRss());
        j.put("cli_seconds_per_token", child.secondsPerToken());
        Evidence.json("rung", j);
        Evidence.text("cli report (last lines)", child.tail());
        assertArrayEquals(greedy, inc.ids(), rung + ", incremental: the dump's greedy ids");
        assertArrayEquals(greedy, full.ids(), rung + ", full recompute: the dump's greedy ids");
        sameBits(baseInc, inc, rung + ", incremental");
        sameBits(baseFull, full, rung + ", full recompute");
        assertEquals(0, child.exit(), rung + ": the CLI run\n" + child.tail());
        if (rung.trunkBytes() != null) {
            assertTrue(inc.trunkBytes() > 0, rung + ": the trunk was read");
            if (rung.ring() == 1) assertEquals(0, inc.pinned(), "the one-slot rung pins nothing: every layer is streamed");
            if (rung.name().startsWith("partly")) assertTrue(inc.pinned() > 0 && inc.pinned() < 93, "partly pinned: " + inc.pinned() + "/93");
            if (rung.name().startsWith("trunk pinned")) assertEquals(93, inc.pinned(), "every layer pinned");
        }
    }

    @Test
    @Order(2)
    @DisplayName("the ladder table: budget, s/token, peak RSS (CLI, VmHWM), ids and logits identical")
    void theLadderTable() throws Exception {
        StringBuilder t = new StringBuilder(String.format(Locale.ROOT, "%-52s %-26s %-7s %-6s %-10s %-12s %s%n", "rung", "budget (trunk / cache)",
                "pinned", "ring", "s/token", "peak RSS", "ids+logits identical"));
        Outcome baseInc = outcome(rungs().findFirst().orElseThrow(), true), baseFull = outcome(rungs().findFirst().orElseThrow(), false);
        List<String> mismatched = new ArrayList<>();
        for (Rung r : rungs().toList()) {
            Outcome inc = outcome(r, true), full = outcome(r, false);
            Child c = child(r);
            boolean same = java.util.Arrays.equals(greedy, inc.ids()) && java.util.Arrays.equals(greedy, full.ids())
                    && bitsEqual(baseInc, inc) && bitsEqual(baseFull, full);
            if (!same) mismatched.add(r.name());
            t.append(String.format(Locale.ROOT, "%-52s %-26s %-7s %-6s %-10.4f %-12s %s%n", r.name(),
                    (r.trunkBytes() == null ? "resident" : kb(r.trunkBytes())) + " / " + (r.cacheBytes() == null ? "resident" : kb(r.cacheBytes())),
                    inc.pinned() + "/93", r.trunkBytes() == null ? "-" : String.valueOf(inc.ring()), c.secondsPerToken(), k3j.plan.Human.bytes(c.peakRss()), same ? "yes" : "NO"));
        }
        Evidence.text("ladder table", t.toString());
        System.out.print(t);
        assertTrue(mismatched.isEmpty(), "rungs whose ids or logit bits differ: " + mismatched + "\n" + t);
    }

    @ParameterizedTest(name = "{0}")
    @Order(3)
    @MethodSource("rungs")
    @DisplayName("sampling with one seed picks the same ids on every rung at 2 threads as everything resident at 1 thread")
    void sampledIdsAreTheSameOnEveryRung(Rung rung) throws Exception {
        Outcome base = SAMPLED.computeIfAbsent("base", k -> sampled(rungs().findFirst().orElseThrow(), 1));
        Outcome got = sampled(rung, 2);
        Evidence.parameter("ids", java.util.Arrays.toString(got.ids()));
        assertArrayEquals(base.ids(), got.ids(), rung + ": sampled ids (temperature 1, top-p 0.9, top-k 40, seed 20261201)");
        sameBits(base, got, rung + ", sampled");
        assertTrue(!java.util.Arrays.equals(greedy, got.ids()), "the sampled ids differ from the greedy ones (the sampler really samples)");
    }

    static final Map<String, Outcome> SAMPLED = new ConcurrentHashMap<>();

    static Outcome sampled(Rung r, int threads) {
        k3j.sample.Sampler s = new k3j.sample.Sampler(new k3j.sample.Sampler.Settings(1.0, 0.9, 40, 20261201L), 0);
        try {
            return run(r, true, threads, (l, v) -> s.next(l, 0, v));
        } catch (Exception e) {
            throw new AssertionError(r + ": " + e.getMessage(), e);
        }
    }

    static String kb(long b) {
        return String.format(Locale.ROOT, "%.1f KB", b / 1e3);
    }

    static Map<String, Object> summary(Outcome o) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ids", o.ids());
        m.put("seconds_per_token", o.secondsPerToken());
        m.put("cache_hits", o.hits());
        m.put("cache_misses", o.misses());
        m.put("trunk_bytes_read", o.trunkBytes());
        m.put("expert_bytes_read", o.expertBytes());
        return m;
    }

    static void sameBits(Outcome want, Outcome got, String what) {
        assertEquals(want.logitBits().size(), got.logitBits().size(), what + ": steps");
        for (int s = 0; s < want.logitBits().size(); s++) {
            int[] a = want.logitBits().get(s), b = got.logitBits().get(s);
            for (int i = 0; i < a.length; i++) {
                if (a[i] != b[i]) {
                    throw new AssertionError(String.format(Locale.ROOT, "%s: step %d logit %d is 0x%08x (%g), resident 0x%08x (%g)", what, s, i,
                            b[i], Float.intBitsToFloat(b[i]), a[i], Float.intBitsToFloat(a[i])));
                }
            }
        }
    }

    static boolean bitsEqual(Outcome a, Outcome b) {
        if (a.logitBits().size() != b.logitBits().size()) return false;
        for (int s = 0; s < a.logitBits().size(); s++) if (!java.util.Arrays.equals(a.logitBits().get(s), b.logitBits().get(s))) return false;
        return true;
    }

    // ---------------------------------------------------------------------------------------------

    static Outcome outcome(Rung r, boolean incremental) throws Exception {
        String key = r.name() + (incremental ? " inc" : " full");
        Outcome o = OUTCOMES.get(key);
        if (o == null) {
            try (Heartbeat _ = Heartbeat.of("ladder: " + key)) {
                o = run(r, incremental, 2, null);
            }
            OUTCOMES.put(key, o);
        }
        return o;
    }

    /** @param picker null: greedy */
    static Outcome run(Rung r, boolean incremental, int threads, Generation.Picker picker) throws Exception {
        return run(r, threads, f -> picker == null ? Generation.greedy(f, prompt, GEN, incremental)
                : Generation.run(f, prompt, GEN, incremental ? f.newState(Generation.capacity(prompt.length, GEN)) : null, picker, true, null));
    }

    /** One rung's model, streams and cache around {@code generate}. */
    static Outcome run(Rung r, int threads, java.util.function.Function<Forward, Generation> generate) throws Exception {
        CheckpointIndex index = CheckpointIndex.open(model);
        TrunkStream stream = null;
        ExpertCache cache = null;
        StreamedTables tables = null;
        try (Model m = Model.open(index, config, -1, r.trunkBytes() == null); Workers w = Workers.of(threads)) {
            if (r.trunkBytes() != null) {
                stream = TrunkStream.open(trunkDir, index, config.layerCount(), StreamOptions.budget(r.trunkBytes()).withRing(r.ring()).withNotes(QUIET));
            }
            if (r.cacheBytes() != null) cache = ExpertCache.open(m.experts(), ExpertCache.Settings.of(r.cacheBytes(), config.topK()), null, QUIET);
            ExpertSource src = cache != null ? cache : m.experts();
            Forward f = stream != null ? m.forward(w, src, stream) : m.forward(w, src);
            if (r.tableChunk() != null) {
                tables = StreamedTables.open(m.binding(), r.tableChunk());
                f = f.streamingTables(tables);
            }
            Generation g = generate.apply(f);
            if (tables != null) assertTrue(tables.lmHeadBytesRead() > 0 && tables.embeddingBytesRead() > 0, r + ": the tables were streamed");
            List<int[]> bits = new ArrayList<>();
            for (float[] l : g.stepLogits()) {
                int[] b = new int[l.length];
                for (int i = 0; i < l.length; i++) b[i] = Float.floatToRawIntBits(l[i]);
                bits.add(b);
            }
            assertEquals(0, f.expertDrops(), r + ": expert drops");
            TrunkStats ts = stream != null ? stream.stats() : null;
            CacheStats cs = cache != null ? cache.totalStats() : null;
            return new Outcome(g.generated(), bits, g.seconds() / GEN, ts != null ? ts.pinned() : 93, ts != null ? ts.ring() : 0,
                    cache != null ? cache.geometry().slots() : 0, cs != null ? cs.hits() : 0, cs != null ? cs.misses() : 0,
                    ts != null ? ts.bytesRead() : 0, cs != null ? cs.bytesRead() : m.experts().bytesRead());
        } finally {
            if (tables != null) tables.close();
            if (cache != null) cache.close();
            if (stream != null) stream.close();
        }
    }

    /**
     * --spec: speculative decoding feeds several ids per forward and rolls the KDA states back when a draft is
     * wrong. A scripted drafter proposes the right next ids with the 1st, 2nd or 3rd replaced by a wrong one, or all
     * right, in turn, so every path (all accepted, some, none) runs; and the n-gram drafter of {@code k3 run --spec}.
     */
    @ParameterizedTest(name = "{0}")
    @Order(9)
    @MethodSource("rungs")
    @DisplayName("--spec: speculative decoding gives the greedy ids at every rung, whether its drafts are all right, partly right or all wrong")
    void speculativeDecodingGivesTheGreedyIds(Rung rung) throws Exception {
        int[] counts = new int[4];
        Speculative.Drafter scripted = (seq, len, max) -> {
            int from = len - prompt.length, k = Math.min(max, 3), wrong = counts[3]++ % 4;   // wrong: 0 none, else that draft
            int[] d = java.util.Arrays.copyOfRange(greedy, from, Math.min(greedy.length, from + k));
            if (wrong > 0 && wrong <= d.length) d[wrong - 1] = (d[wrong - 1] + 1) % config.vocabSize();
            return d;
        };
        Outcome o;
        try (Heartbeat _ = Heartbeat.of("ladder: --spec, " + rung)) {
            o = run(rung, 2, f -> {
                Speculative.Result r = Speculative.greedy(f, prompt, GEN, 4, f.newState(Generation.capacity(prompt.length, GEN)), scripted, null);
                counts[0] = r.verifications();
                counts[1] = r.drafted();
                counts[2] = r.accepted();
                return r.generation();
            });
        }
        Evidence.text("speculative decoding, scripted drafts", String.format(Locale.ROOT, "ids %s%nverifying forwards %d, drafted %d, accepted %d%n",
                java.util.Arrays.toString(o.ids()), counts[0], counts[1], counts[2]));
        assertArrayEquals(greedy, o.ids(), rung + ": --spec with scripted drafts changed the greedy ids");
        assertTrue(counts[2] > 0 && counts[2] < counts[1], rung + ": the scripted drafts must be partly accepted and partly rejected (drafted "
                + counts[1] + ", accepted " + counts[2] + ")");
        Outcome ngram = run(rung, 2, f -> Speculative.greedy(f, prompt, GEN, 4, f.newState(Generation.capacity(prompt.length, GEN)), null).generation());
        assertArrayEquals(greedy, ngram.ids(), rung + ": --spec with n-gram drafts changed the greedy ids");
    }

    /** The CLI in a child JVM (this test's class path, the launcher's flags), incremental; its --out JSON and report. */
    static Child child(Rung r) throws Exception {
        Child c = CHILDREN.get(r.name());
        if (c != null) return c;
        Path out = Files.createTempDirectory(tmp, "cli");
        List<String> cmd = new ArrayList<>(List.of(ProcessHandle.current().info().command().orElse("java"),
                "--add-modules", "jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "k3j.cli.K3", model.toString(), "--ids", join(prompt), "--gen", String.valueOf(GEN), "--incremental", "--threads", "2",
                "--out", out.resolve("run.json").toString()));
        if (r.trunkBytes() != null) {
            cmd.addAll(List.of("--trunk", trunkDir.toString()));
            if (r.tableChunk() != null) cmd.addAll(List.of("--preset", "ultra"));   // the budgets below override the preset's
            cmd.addAll(List.of("--trunk-gb", gb(r.trunkBytes()), "--trunk-ring", String.valueOf(r.ring())));
        }
        if (r.cacheBytes() != null) cmd.addAll(List.of("--cache-gb", gb(r.cacheBytes())));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(out.resolve("log.txt").toFile()).start();
        try (Heartbeat _ = Heartbeat.of("ladder: " + r.name() + ", the CLI in a child JVM")) {
            if (!p.waitFor(300, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError(r + ": the CLI did not finish in 300 s");
            }
        }
        List<String> lines = Files.readAllLines(out.resolve("log.txt"));
        String tail = String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
        long peak = -1;
        double spt = -1;
        if (p.exitValue() == 0 && !Files.exists(out.resolve("run.json"))) {
            throw new AssertionError(r + ": the CLI exited 0 but wrote no " + out.resolve("run.json") + ", so its generated ids cannot be checked\n" + tail);
        }
        if (Files.exists(out.resolve("run.json"))) {
            JsonNode j = JSON.readTree(out.resolve("run.json").toFile());
            assertEquals(r.tableChunk() != null, j.get("ultra_low_memory").asBoolean(), r + ": --preset ultra streams the model tables, no other rung does");
            peak = j.get("peak_rss_bytes").asLong();
            spt = j.get("seconds_per_token").asDouble();
            assertEquals(join(greedy), join(ints(j.get("generated_ids"))), r + ": the CLI's generated ids");
        }
        c = new Child(p.exitValue(), peak, spt, tail);
        CHILDREN.put(r.name(), c);
        return c;
    }

    static int[] ints(JsonNode a) {
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; i++) v[i] = a.get(i).asInt();
        return v;
    }

    static String gb(long bytes) {
        return String.format(Locale.ROOT, "%.9f", bytes / 1e9);
    }

    static String join(int[] ids) {
        StringBuilder b = new StringBuilder();
        for (int id : ids) b.append(b.isEmpty() ? "" : ",").append(id);
        return b.toString();
    }
}
