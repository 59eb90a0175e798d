package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Epic;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.api.Sampling;
import k3j.api.Serving;
import k3j.api.Settings;
import k3j.api.TokenListener;
import k3j.harness.Evidence;
import k3j.harness.Project;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: nothing one request does to {@link Serving} reaches another request or the batch thread. Bad requests are
 * refused when submitted, each with its own exception (an id outside the vocabulary, a prompt over the context, no
 * tokens to generate); a full queue refuses as retryable; a sink that throws ends its own sequence with
 * {@link Serving.Finish#ERROR}; a cancelled sequence gets no token after the cancel and its slot serves the next
 * one; drain finishes what was admitted and refuses the rest; close ends what runs as cancelled. Every sequence that
 * runs beside one of these gives the ids of its run alone ({@link Engine#generate}). On the Java API, tiny-k3.
 */
@Tag("invariance")
@Epic("invariance")
class ServingIsolationGate {
    static Engine engine;
    static final int[] PROMPT = {250, 17, 101, 3, 199, 64};
    static final int GEN = 12;
    static int[] alone;

    @BeforeAll
    static void open() {
        engine = Engine.open(Project.fixture("tiny-k3"), Plan.resident(), Engine.Options.DEFAULTS.withThreads(2).withReport(s -> {}, s -> {}));
        alone = engine.generate(PROMPT, new Settings(Sampling.GREEDY, GEN, false, true, 0), TokenListener.NONE).ids();
        assertEquals(GEN, alone.length, "the run alone");
    }

    @AfterAll
    static void close() {
        if (engine != null) engine.close();
    }

    /** What one sequence got. */
    static final class Got implements Serving.Sink {
        final List<Integer> ids = new ArrayList<>();
        final CountDownLatch done = new CountDownLatch(1);
        final BiConsumer<Got, Integer> onToken;
        volatile Serving.Finish finish;
        volatile String detail;
        Serving.Ticket ticket;

        Got(BiConsumer<Got, Integer> onToken) {
            this.onToken = onToken;
        }

        @Override
        public void prompt(List<Serving.TokenLogprob> entries) {}

        @Override
        public void token(int step, Serving.TokenLogprob token) {
            ids.add(token.id());
            onToken.accept(this, step);
        }

        @Override
        public void finished(Serving.Finish why, String detail) {
            finish = why;
            this.detail = detail;
            done.countDown();
        }

        void await() throws InterruptedException {
            if (!done.await(300, TimeUnit.SECONDS)) fail("a sequence did not finish in 300 s");
        }

        int[] idArray() {
            return ids.stream().mapToInt(Integer::intValue).toArray();
        }
    }

    static Serving.Request request(int gen) {
        return new Serving.Request(PROMPT, gen, Sampling.GREEDY, 2, false, false);
    }

    static Got plain() {
        return new Got((g, step) -> {});
    }

    @Test
    void badRequestsAreRefusedWhenSubmittedAndTheBatchGoesOn() throws Exception {
        try (Serving s = Serving.open(engine, new Serving.Limits(2, 4, 4, 32))) {
            int vocab = engine.shape().vocabSize();
            IllegalArgumentException id = assertThrows(IllegalArgumentException.class, () -> s.submit(new Serving.Request(new int[] {1, vocab, 2}, 4, Sampling.GREEDY, 0, false, false), plain()));
            assertTrue(id.getMessage().contains("outside the vocabulary"), id.getMessage());
            assertThrows(IllegalArgumentException.class, () -> s.submit(new Serving.Request(new int[] {1, -1}, 4, Sampling.GREEDY, 0, false, false), plain()));
            Serving.Rejected ctx = assertThrows(Serving.Rejected.class, () -> s.submit(new Serving.Request(new int[30], 3, Sampling.GREEDY, 0, false, false), plain()));
            assertFalse(ctx.retryable(), "a prompt over the context never fits: " + ctx.getMessage());
            assertThrows(IllegalArgumentException.class, () -> new Serving.Request(PROMPT, 0, Sampling.GREEDY, 0, false, false));
            assertThrows(IllegalArgumentException.class, () -> new Serving.Request(new int[0], 3, Sampling.GREEDY, 0, false, false));
            assertThrows(IllegalArgumentException.class, () -> new Serving.Request(PROMPT, 3, Sampling.GREEDY, 21, false, false));
            Got g = plain();
            s.submit(request(GEN), g);
            g.await();
            assertEquals(Serving.Finish.LENGTH, g.finish);
            assertArrayEquals(alone, g.idArray(), "the ids after the refusals");
        }
    }

    @Test
    void aFullQueueRefusesAsRetryable() throws Exception {
        try (Serving s = Serving.open(engine, new Serving.Limits(1, 1, 4, 64))) {
            Got a = plain(), b = plain();
            s.submit(request(40), a);
            s.submit(request(40), b);
            Serving.Rejected full = assertThrows(Serving.Rejected.class, () -> s.submit(request(4), plain()));
            assertTrue(full.retryable(), "a full queue is retryable: " + full.getMessage());
            a.await();
            b.await();
            assertEquals(Serving.Finish.LENGTH, b.finish);
        }
    }

    @Test
    void aThrowingSinkEndsItsOwnSequenceOnly() throws Exception {
        try (Serving s = Serving.open(engine, new Serving.Limits(3, 4, 2, 32))) {
            Got bad = new Got((g, step) -> {
                if (step == 2) throw new IllegalStateException("planted sink failure");
            });
            Got left = plain(), right = plain();
            s.submit(request(GEN), left);
            s.submit(request(GEN), bad);
            s.submit(request(GEN), right);
            for (Got g : List.of(left, bad, right)) g.await();
            assertEquals(Serving.Finish.ERROR, bad.finish);
            assertTrue(bad.detail.contains("planted sink failure"), bad.detail);
            assertEquals(3, bad.ids.size(), "no token after the sink failed");
            for (Got g : List.of(left, right)) {
                assertEquals(Serving.Finish.LENGTH, g.finish);
                assertArrayEquals(alone, g.idArray(), "a sequence beside the failing one");
            }
            Got after = plain();
            s.submit(request(GEN), after);
            after.await();
            assertArrayEquals(alone, after.idArray(), "the batch thread goes on");
        }
    }

    @Test
    void aCancelledSequenceLeavesBeforeTheNextStepAndItsSlotServesTheNext() throws Exception {
        try (Serving s = Serving.open(engine, new Serving.Limits(1, 2, 4, 64))) {
            Got cancelled = new Got((g, step) -> {
                if (step == 1) g.ticket.cancel();
            });
            cancelled.ticket = s.submit(request(40), cancelled);
            Got next = plain();
            s.submit(request(GEN), next);
            cancelled.await();
            next.await();
            assertEquals(Serving.Finish.CANCELLED, cancelled.finish);
            assertEquals(2, cancelled.ids.size(), "tokens after the cancel");
            assertArrayEquals(alone, next.idArray(), "the sequence in the freed slot");
            Evidence.parameter("cancelled after", cancelled.ids.size() + " tokens");
        }
    }

    @Test
    void drainFinishesTheAdmittedAndCloseCancelsTheRunning() throws Exception {
        Serving s = Serving.open(engine, new Serving.Limits(2, 2, 4, 64));
        Got a = plain(), b = plain();
        s.submit(request(GEN), a);
        s.submit(request(GEN), b);
        s.drain();
        assertEquals(Serving.Finish.LENGTH, a.finish);
        assertArrayEquals(alone, b.idArray(), "a drained sequence");
        Serving.Rejected r = assertThrows(Serving.Rejected.class, () -> s.submit(request(2), plain()));
        assertTrue(r.retryable(), r.getMessage());
        s.close();
        try (Serving t = Serving.open(engine, new Serving.Limits(1, 1, 4, 64))) {
            Got running = new Got((g, step) -> {
                if (step == 0) new Thread(t::close).start();
            });
            t.submit(request(40), running);
            running.await();
            assertEquals(Serving.Finish.CANCELLED, running.finish);
            assertTrue(running.ids.size() < 40, "close stopped the sequence");
        }
    }
}
