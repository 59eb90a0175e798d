package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.api.State;
import k3j.api.internal.ApiInternals;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.kernels.Argmax;
import k3j.model.DecodeState;
import k3j.model.Forward;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Claim: k3j does not part from itself in the ways K3 servers did in 2026. Prefill in chunks of 1, 7 and 64 tokens
 * gives the one-shot prefill's logits at every position (a chunk boundary that dropped the KDA conv state, or
 * restarted the MLA positions, would not); a state saved after every position, written to a state file and read
 * back, continues with the bits of the uninterrupted run (a restore from a stale snapshot would not); N sessions
 * decoding concurrently on one {@link Engine} each give the bits they give alone (a state shared or leaked between
 * sequences would not). Bit for bit, on the Java API, on the checked-in 13-layer oracle (KDA and MLA layers, MoE).
 *
 * <p>Data: oracle-fixtures/tiny-k3, and id sequences longer than the largest chunk so that every chunk size parts
 * the sequence at several places, inside and across the KDA conv window.
 */
@Tag("invariance")
@Epic("invariance")
class InvarianceGate {
    static final int LONG = 150, SESSIONS = 4, DECODE = 12;
    static Engine engine;

    @BeforeAll
    static void open() {
        engine = Engine.open(Project.fixture("tiny-k3"), Plan.resident(), Engine.Options.DEFAULTS.withThreads(2).withReport(s -> {}, s -> {}));
    }

    @AfterAll
    static void close() {
        if (engine != null) engine.close();
    }

    /** A deterministic id sequence over the model's vocabulary, different per {@code seed}. */
    static int[] ids(int n, int seed) {
        int v = engine.shape().vocabSize();
        int[] out = new int[n];
        long x = 0x9E3779B97F4A7C15L * (seed + 1);
        for (int i = 0; i < n; i++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            out[i] = (int) Long.remainderUnsigned(x >>> 17, v);
        }
        return out;
    }

    @ParameterizedTest(name = "chunks of {0}")
    @ValueSource(ints = {1, 7, 64})
    @DisplayName("prefill in chunks gives the one-shot prefill's logits at every position")
    void chunkedPrefillGivesOneShotBits(int chunk) {
        Allure.feature("chunked prefill");
        Forward f = ApiInternals.get().forward(engine);
        int[] ids = ids(LONG, 0);
        float[] oneShot = f.step(ids, f.newState(LONG), true, null).logits();
        float[] full = f.full(ids, true, null).logits();
        same("one-shot incremental prefill against full recompute", full, oneShot, 0);
        DecodeState st = f.newState(LONG);
        float[] chunked = new float[oneShot.length];
        int v = vocab();
        for (int at = 0; at < LONG; at += chunk) {
            int n = Math.min(chunk, LONG - at);
            float[] rows = f.step(Arrays.copyOfRange(ids, at, at + n), st, true, null).logits();
            System.arraycopy(rows, 0, chunked, at * v, n * v);
        }
        Evidence.parameter("positions", LONG + " in " + (LONG + chunk - 1) / chunk + " chunks of " + chunk);
        same("chunks of " + chunk + " against one shot", oneShot, chunked, 0);
    }

    @Test
    @DisplayName("a state saved at every position and restored continues with the uninterrupted run's bits")
    void aRestoredStateGivesRecomputeBits(@TempDir Path tmp) {
        Allure.feature("saved and restored state");
        Forward f = ApiInternals.get().forward(engine);
        int n = 40, v = vocab();
        int[] ids = ids(n, 1);
        float[] whole = f.step(ids, f.newState(n), true, null).logits();
        for (int p = 1; p < n; p++) {
            DecodeState st = f.newState(n);
            f.step(Arrays.copyOf(ids, p), st, true, null);
            Path file = tmp.resolve("at-" + p + ".k3state");
            engine.saveState(file, ApiInternals.get().state(Arrays.copyOf(ids, p), st));
            State back = engine.loadState(file, n - p);
            assertEquals(p, back.positions(), "positions restored");
            float[] rest = f.step(Arrays.copyOfRange(ids, p, n), ApiInternals.get().decode(back), true, null).logits();
            same("restored after position " + (p - 1) + ", continued", Arrays.copyOfRange(whole, p * v, n * v), rest, p);
        }
        Evidence.parameter("restores", (n - 1) + " (after every position of " + n + " ids), each continued to the end");
    }

    @Test
    @DisplayName("sessions decoding concurrently on one Engine give the bits each gives alone")
    void concurrentSessionsGiveEachAlonesBits() throws Exception {
        Allure.feature("concurrent sessions");
        List<float[]> alone = new ArrayList<>();
        for (int s = 0; s < SESSIONS; s++) alone.add(session(ids(20 + 3 * s, 10 + s), null));
        ExecutorService pool = Executors.newFixedThreadPool(SESSIONS);
        try {
            for (int round = 0; round < 3; round++) {
                CyclicBarrier start = new CyclicBarrier(SESSIONS);
                List<Future<float[]>> runs = new ArrayList<>();
                for (int s = 0; s < SESSIONS; s++) {
                    int[] prompt = ids(20 + 3 * s, 10 + s);
                    runs.add(pool.submit(() -> session(prompt, start)));
                }
                for (int s = 0; s < SESSIONS; s++) same("round " + round + ", session " + s + " concurrent against alone", alone.get(s), runs.get(s).get(120, TimeUnit.SECONDS), 0);
            }
        } finally {
            pool.shutdownNow();
        }
        Evidence.parameter("sessions", SESSIONS + " concurrent, 3 rounds, each a prefill and " + DECODE + " greedy steps; distinct prompts of 20-29 ids");
    }

    /** Prefill {@code prompt} in a state of its own, then decode greedily: every logit row, in order. */
    private static float[] session(int[] prompt, CyclicBarrier start) throws Exception {
        if (start != null) start.await(60, TimeUnit.SECONDS);
        Forward f = ApiInternals.get().forward(engine);
        int v = vocab();
        DecodeState st = f.newState(prompt.length + DECODE);
        float[] out = new float[(prompt.length + DECODE) * v];
        float[] rows = f.step(prompt, st, true, null).logits();
        System.arraycopy(rows, 0, out, 0, rows.length);
        int next = Argmax.reference(rows, rows.length - v, v);
        for (int i = 0; i < DECODE; i++) {
            float[] r = f.step(new int[] {next}, st, true, null).logits();
            System.arraycopy(r, 0, out, (prompt.length + i) * v, v);
            next = Argmax.reference(r, 0, v);
        }
        return out;
    }

    private static int vocab() {
        return ApiInternals.get().forward(engine).weights().lmHead().rows();
    }

    /** Bit-for-bit equality; the first differing position (offset by {@code first}) and id are named. */
    private static void same(String what, float[] want, float[] got, int first) {
        assertEquals(want.length, got.length, what + ": row count");
        int v = vocab();
        for (int i = 0; i < want.length; i++) {
            if (Float.floatToRawIntBits(want[i]) != Float.floatToRawIntBits(got[i])) {
                fail(what + ": the logits part at position " + (first + i / v) + ", id " + (i % v) + ": " + want[i] + " against " + got[i]);
            }
        }
    }
}
