package k3j.trunk;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import k3j.cache.CacheGeometry;
import k3j.cache.ExpertCache;
import k3j.cache.ExpertSource;
import k3j.config.ConfigReader;
import k3j.config.ModelConfig;
import k3j.io.CheckpointIndex;
import k3j.kernels.Workers;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.Model;

/**
 * Benchmark, not a test: the whole forward streamed from a packed trunk against the same forward resident, on a
 * small packed model (oracle-fixtures/mini-k3-93). {@code ci/bench-stream [MODEL] [TRUNK_DIR] [reps]} (packs the
 * trunk when TRUNK_DIR has none). Per configuration: tokens/s of incremental greedy generation (gen 8, after
 * one unmeasured run), the trunk's read MB/s against the raw O_DIRECT MB/s of the same trunk.bin measured in the
 * same run ({@link TrunkReadBench#raw}), and how much of the read time the reader thread hid behind compute
 * (read time − time the forward waited for the reader − time it read itself). Experts are served from a cache
 * that holds them all, so the streamed/resident gap is the trunk's.
 */
public final class StreamedForwardBench {
    public static void main(String[] args) throws Exception {
        Path model = Path.of(args.length > 0 ? args[0] : "oracle-fixtures/mini-k3-93");
        Path trunk = Path.of(args.length > 1 ? args[1] : "engine/target/bench/mini-trunk");
        int reps = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        ModelConfig cfg = ConfigReader.read(model.resolve("config.json"));
        CheckpointIndex index = CheckpointIndex.open(model);
        if (!Files.exists(trunk.resolve(TrunkManifest.JSON))) TrunkPacker.pack(index, trunk, Progress.silent(), s -> {}, null);
        TrunkManifest m = TrunkManifest.read(trunk);
        long largest = 0;
        for (long r : m.runSizes()) largest = Math.max(largest, r);
        long slot = TrunkManifest.roundUp(largest, 4096);
        int[] prompt;
        {
            var b = java.nio.ByteBuffer.wrap(Files.readAllBytes(Path.of("reference-dumps/mini-k3-93/ids.bin"))).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            prompt = new int[b.remaining() / 4 - 8];
            for (int i = 0; i < prompt.length; i++) prompt[i] = b.getInt();
        }
        int threads = Integer.getInteger("k3.threads", 2);
        System.out.printf(Locale.ROOT, "model %s (%d layers), trunk %s: %.2f MB packed, largest run %.1f KB; prompt %d ids, gen 8, incremental, %d threads%n",
                model, cfg.layerCount(), trunk, m.packedBytes() / 1e6, largest / 1e3, prompt.length, threads);
        double rawRun = Math.max(TrunkReadBench.raw(m.bin(), m.fileSize(), slot), TrunkReadBench.raw(m.bin(), m.fileSize(), slot));
        double rawBig = TrunkReadBench.raw(m.bin(), m.fileSize(), 4L << 20 > m.fileSize() ? TrunkManifest.roundUp(m.fileSize(), 4096) : 4L << 20);
        System.out.printf(Locale.ROOT, "raw O_DIRECT of trunk.bin: %.0f MB/s in calls of one slot (%.1f KB), %.0f MB/s in 4 MiB calls%n", rawRun, slot / 1e3, rawBig);
        String[][] configs = {{"resident", "0", "0"}, {"streamed, ring 1 (no reader thread)", "1", "1"}, {"streamed, ring 2", "2", "2"},
                {"streamed, ring 4", "4", "4"}};
        double resident = 0;
        for (String[] c : configs) {
            int ring = Integer.parseInt(c[1]);
            double best = Double.MAX_VALUE;
            TrunkStats last = null;
            for (int rep = 0; rep <= reps; rep++) {
                try (Model md = Model.open(index, cfg, -1, ring == 0); Workers w = Workers.of(threads)) {
                    long one = md.experts().locate(md.experts().probeLayer(), 0).length();
                    long all = (long) (cfg.layerCount() - 1) * cfg.expertCount() + 8;
                    try (ExpertCache cache = ExpertCache.open(md.experts(), ExpertCache.Settings.of(all * CacheGeometry.slotBytes(one), cfg.topK()), null, s -> {});
                         TrunkStream ts = ring == 0 ? null : TrunkStream.open(trunk, index, cfg.layerCount(),
                                 StreamOptions.budget(ring * slot).withRing(ring).withNotes(s -> {}))) {
                        ExpertSource src = cache;
                        Generation.greedy(ts == null ? md.forward(w, src) : md.forward(w, src, ts), prompt, 1, true);   // experts into the cache
                        TrunkStats before = ts == null ? null : ts.stats();
                        Forward f = ts == null ? md.forward(w, src) : md.forward(w, src, ts);
                        Generation g = Generation.greedy(f, prompt, 8, true, false, null);
                        if (rep > 0 && g.seconds() < best) {
                            best = g.seconds();
                            last = ts == null ? null : minus(ts.stats(), before);
                        }
                    }
                }
            }
            double tps = 8 / best;
            if (ring == 0) resident = tps;
            System.out.printf(Locale.ROOT, "%-36s %.2f tokens/s (best of %d)%s%n", c[0], tps, reps,
                    ring == 0 ? "" : String.format(Locale.ROOT, " = %.0f%% of resident", 100 * tps / resident));
            if (last != null) {
                double read = last.readNanos() / 1e9, hidden = last.overlappedNanos() / 1e9;
                System.out.printf(Locale.ROOT, "    trunk: %.1f MB read in %.3f s = %.0f MB/s (%.0f%% of raw one-slot O_DIRECT); forward waited %.3f s, read %.3f s itself; "
                                + "prefetch hid %.3f s = %.0f%% of the read time%n", last.bytesRead() / 1e6, read, last.bytesRead() / 1e6 / read,
                        100 * last.bytesRead() / 1e6 / read / rawRun, last.waitNanos() / 1e9, last.callerReadNanos() / 1e9, hidden,
                        read > 0 ? 100 * hidden / read : 0.0);
            }
        }
    }

    static TrunkStats minus(TrunkStats a, TrunkStats b) {
        return new TrunkStats(a.layers(), a.pinned(), a.ring(), a.direct(), a.readerThread(), a.pinnedHits() - b.pinnedHits(), a.ringHits() - b.ringHits(),
                a.misses() - b.misses(), a.reads() - b.reads(), a.prefetchReads() - b.prefetchReads(), a.failedReads() - b.failedReads(),
                a.bytesRead() - b.bytesRead(), a.readNanos() - b.readNanos(), a.callerReadNanos() - b.callerReadNanos(), a.waitNanos() - b.waitNanos(),
                a.acquireNanos() - b.acquireNanos(), a.widenNanos() - b.widenNanos());
    }
}
