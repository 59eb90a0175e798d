package k3j.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CacheSimulatorTest {
    static int[] pairsOf(int[] keys) {
        int[] p = new int[keys.length * 2];
        for (int i = 0; i < keys.length; i++) {
            p[2 * i] = keys[i] / 8;
            p[2 * i + 1] = keys[i] % 8;
        }
        return p;
    }

    /** The most hits any eviction/bypass schedule can get, by exhaustive search. */
    static int optimum(int[] keys, int i, Set<Integer> resident, int cap) {
        if (i == keys.length) return 0;
        int k = keys[i];
        if (resident.contains(k)) return 1 + optimum(keys, i + 1, resident, cap);
        int best = optimum(keys, i + 1, resident, cap); // bypass
        if (resident.size() < cap) {
            Set<Integer> next = new HashSet<>(resident);
            next.add(k);
            return Math.max(best, optimum(keys, i + 1, next, cap));
        }
        for (int victim : resident) {
            Set<Integer> next = new HashSet<>(resident);
            next.remove(victim);
            next.add(k);
            best = Math.max(best, optimum(keys, i + 1, next, cap));
        }
        return best;
    }

    @Test
    void beladyWithBypassIsOptimal() {
        Random rnd = new Random(3);
        for (int trial = 0; trial < 200; trial++) {
            int n = 4 + rnd.nextInt(9), distinct = 2 + rnd.nextInt(4), cap = 1 + rnd.nextInt(3);
            int[] keys = new int[n];
            for (int i = 0; i < n; i++) keys[i] = rnd.nextInt(distinct);
            assertEquals(optimum(keys, 0, new HashSet<>(), cap), new CacheSimulator(pairsOf(keys)).belady(cap), "trial " + trial);
        }
    }

    @Test
    void pinnedLruPinsTheHottestHalf() {
        // cap 4: npin 2 pins keys 0 and 1 (most frequent); 2 and 3 share 2 LRU slots with 4
        int[] keys = {0, 1, 0, 1, 0, 1, 2, 3, 4, 2, 3, 4};
        // hot: 0,1 first touches miss, then 4 hits; cold: 2,3,4 cycle through 2 slots -> 0 hits
        assertEquals(4, new CacheSimulator(pairsOf(keys)).pinnedLru(4));
    }

    @Test
    void countsRepeatsAndDistinct() {
        CacheSimulator s = new CacheSimulator(pairsOf(new int[] {5, 9, 5, 5, 17}));
        assertEquals(5, s.requests());
        assertEquals(3, s.distinct());
        assertEquals(2, s.repeats());
        assertEquals(5 / 8, s.hottest(1)[0][0]);
        assertEquals(5 % 8, s.hottest(1)[0][1]);
        assertEquals(3, s.hottest(1)[0][2]);
    }

    @Test
    void traceFilesRoundTripAndBadTracesAreRefused(@TempDir Path dir) throws IOException {
        CacheTrace t = new CacheTrace(3, 8);
        t.record(1, 0);
        t.record(0, 3);
        t.record(1, 0);
        assertEquals("wrote " + dir.resolve("expert_trace.bin") + ": 3 requests (0 KB)", t.write(dir));
        assertEquals(24, Files.size(dir.resolve(CacheTrace.TRACE_FILE)));
        assertEquals(java.util.List.of(1, 0, 0, 3, 1, 0), java.util.Arrays.stream(CacheTrace.readPairs(dir)).boxed().toList());
        assertEquals("{\"n_layers\":3,\"n_experts\":8,\"counts\":{\"0,3\":1,\"1,0\":2}}", Files.readString(dir.resolve(CacheTrace.HIST_FILE)));
        Path odd = dir.resolve("odd.bin");
        Files.write(odd, new byte[12]);
        assertThrows(IOException.class, () -> CacheTrace.readPairs(odd));
        assertThrows(IOException.class, () -> CacheTrace.readPairs(dir.resolve("missing")));

        // the geometry the histogram records bounds the pairs sim-cache replays when no --model is given
        assertEquals(java.util.List.of(3, 8), java.util.Arrays.stream(CacheTrace.readGeometry(dir.resolve(CacheTrace.HIST_FILE))).boxed().toList());
        Path hist = dir.resolve("bad_hist.json");
        for (String bad : new String[] {"{\"n_layers\":0,\"n_experts\":8}", "{\"n_layers\":\"3\",\"n_experts\":8}",
                "{\"n_layers\":3}", "{\"n_layers\":3,\"n_layers\":4,\"n_experts\":8}", "[3,8]", "{\"n_layers\":3,\"n_experts\":1e9}"}) {
            Files.writeString(hist, bad);
            assertThrows(IOException.class, () -> CacheTrace.readGeometry(hist), bad);
        }
    }
}
