package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import java.util.stream.StreamSupport;
import k3j.api.Engine;
import k3j.api.Plan;
import k3j.api.Sampling;
import k3j.api.Serving;
import k3j.api.Settings;
import k3j.api.TokenListener;
import k3j.api.PlantedBatcher;
import k3j.api.internal.ApiInternals;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.model.BatchStep;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.model.Generation;
import k3j.model.PlantedStep;
import k3j.sample.Logprobs;
import k3j.sample.Sampler;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Claim: under continuous batching ({@link Serving}) a sequence's generated ids, every logits row its logprobs come
 * from, and the logprobs themselves are the bits of its run alone ({@link Generation#run} over {@link Forward#step}, which
 * {@link Engine#generate} and {@code k3 run} are), whatever runs beside it: over seeded random arrival schedules
 * (docs/fp-contract.md §8), with prompts sharing prefixes, greedy and sampled, chunked prefill and prompt logprobs,
 * slots freed and reused. Each schedule also serves the reference dump's prompt greedily, whose ids must be the
 * dump's generated ids. Two mutants must fail it: a reduction across the batch (the final norm's mean square over
 * every row of the step) and a freed slot's state reused without reset. Metric per case: rows differing / compared.
 *
 * <p>Data: oracle-fixtures/tiny-k3 and mini-k3-93 with their reference dumps; the schedules' parameters and the
 * allowed differing rows in {@code BatchInvarianceGate.json} beside this class.
 */
@Tag("invariance")
@Epic("invariance")
class BatchInvarianceGate {
    /** One sequence of a schedule. */
    record Seq(int arrival, int[] prompt, int gen, Sampling sampling, int top, boolean promptLogprobs) {}

    /** A schedule: the limits and the sequences in arrival order. */
    record Schedule(int maxActive, int chunk, int maxContext, List<Seq> seqs) {}

    /** What one sequence produced in the batch. */
    static final class Got {
        final List<float[]> rows = new ArrayList<>();
        final List<Serving.TokenLogprob> entries = new ArrayList<>();
        final List<Integer> ids = new ArrayList<>();
        volatile Serving.Finish finish;
        volatile String detail;
    }

    /** A sequence run alone: its ids and the rows its logprobs come from. */
    record Alone(int[] ids, List<float[]> rows) {}

    static JsonNode manifest() {
        try (InputStream in = BatchInvarianceGate.class.getResourceAsStream("BatchInvarianceGate.json")) {
            if (in == null) throw new AssertionError("gate data missing: BatchInvarianceGate.json beside the gate");
            return new ObjectMapper().readTree(in);
        } catch (IOException e) {
            throw new AssertionError("gate data unreadable: BatchInvarianceGate.json: " + e.getMessage(), e);
        }
    }

    static Stream<Arguments> cases() {
        JsonNode cases = manifest().path("cases");
        if (!cases.isArray() || cases.isEmpty()) throw new AssertionError("BatchInvarianceGate.json has no cases");
        return StreamSupport.stream(cases.spliterator(), false).map(c -> Arguments.of(c.path("name").asText(), c));
    }

    static int need(JsonNode c, String field) {
        JsonNode n = c.path(field);
        if (!n.isNumber()) throw new AssertionError("BatchInvarianceGate.json: case " + c.path("name").asText() + " has no number " + field);
        return n.asInt();
    }

    static Engine open(JsonNode c) {
        return Engine.open(Project.fixture(c.path("fixture").asText()), Plan.resident(), Engine.Options.DEFAULTS.withThreads(2).withReport(s -> {}, s -> {}));
    }

    /** Schedule {@code s} of case {@code c}: the dump's prompt first (greedy, its generated ids' count), then random sequences. */
    static Schedule schedule(JsonNode c, int s, int vocab, int[] dumpPrompt, int dumpGen) {
        Random r = new Random(need(c, "seed") * 1000L + s);
        int n = need(c, "sequences"), arrivals = need(c, "arrival_steps");
        List<Seq> seqs = new ArrayList<>();
        seqs.add(new Seq(r.nextInt(arrivals + 1), dumpPrompt, dumpGen, Sampling.GREEDY, 3, false));
        for (int i = 1; i < n; i++) {
            int len = range(r, c.path("prompt")), gen = range(r, c.path("gen"));
            int[] prompt = new int[len];
            for (int j = 0; j < len; j++) prompt[j] = r.nextInt(vocab);
            if (r.nextDouble() < c.path("shared_prefix").asDouble()) {
                int[] other = seqs.get(r.nextInt(seqs.size())).prompt();
                System.arraycopy(other, 0, prompt, 0, Math.min(len, 1 + r.nextInt(other.length)));
            }
            Sampling sampling = r.nextDouble() < c.path("sampled").asDouble()
                    ? new Sampling(r.nextBoolean() ? 0.7 : 1.3, r.nextBoolean() ? 0.9 : 1.0, r.nextBoolean() ? 0 : 40, r.nextLong()) : Sampling.GREEDY;
            seqs.add(new Seq(r.nextInt(arrivals + 1), prompt, gen, sampling, r.nextInt(6), r.nextDouble() < c.path("prompt_logprobs").asDouble()));
        }
        seqs.sort((a, b) -> Integer.compare(a.arrival(), b.arrival()));
        return new Schedule(pick(r, c.path("max_active")), pick(r, c.path("prefill_chunk")), need(c, "max_context"), seqs);
    }

    static int range(Random r, JsonNode lohi) {
        return lohi.get(0).asInt() + r.nextInt(lohi.get(1).asInt() - lohi.get(0).asInt() + 1);
    }

    static int pick(Random r, JsonNode options) {
        return options.get(r.nextInt(options.size())).asInt();
    }

    /** The sequence alone: prompt rows from one all-positions feed, then {@link Generation#run} with every step's logits. */
    static Alone alone(Forward f, Seq s) {
        int v = f.weights().lmHead().rows();
        List<float[]> rows = new ArrayList<>();
        int[] p = s.prompt();
        if (s.promptLogprobs()) {
            DecodeState st = f.newState(p.length + 1);
            float[] all = f.step(p.clone(), st, true, null).logits();
            for (int i = 0; i + 1 < p.length; i++) rows.add(Arrays.copyOfRange(all, i * v, (i + 1) * v));
        }
        Sampling sm = s.sampling();
        Sampler sampler = new Sampler(new Sampler.Settings(sm.temperature(), sm.topP(), sm.topK(), sm.seed()), 0);
        Generation g = Generation.run(f, p, s.gen(), f.newState(Generation.capacity(p.length, s.gen())), (l, n) -> sampler.next(l, 0, n), true, null);
        rows.addAll(g.stepLogits());
        return new Alone(g.generated(), rows);
    }

    /** Serves the schedule through {@code step}; the arrivals are submitted on the batch thread before the step they arrive at. */
    static List<Got> serve(BatchStep step, Schedule sc, int vocab, boolean resetSlots) throws InterruptedException {
        List<Seq> seqs = sc.seqs();
        List<Got> got = new ArrayList<>();
        for (int i = 0; i < seqs.size(); i++) got.add(new Got());
        CountDownLatch done = new CountDownLatch(seqs.size());
        Map<Serving.Ticket, Got> byTicket = new IdentityHashMap<>();
        int[] next = {0};
        PlantedBatcher.BeforeStep arrive = (steps, serving) -> {
            Serving.Stats st = serving.stats();
            boolean idle = st.active() == 0 && st.queued() == 0;
            while (next[0] < seqs.size() && (seqs.get(next[0]).arrival() <= steps || idle)) {
                Seq s = seqs.get(next[0]);
                Got g = got.get(next[0]++);
                idle = false;
                byTicket.put(serving.submit(new Serving.Request(s.prompt(), s.gen(), s.sampling(), s.top(), s.promptLogprobs(), false), sink(g, done)), g);
            }
        };
        PlantedBatcher.Rows rows = (who, logits, off, n) -> byTicket.get(who).rows.add(Arrays.copyOfRange(logits, off, off + n));
        try (Serving serving = PlantedBatcher.open(step, new Serving.Limits(sc.maxActive(), seqs.size(), sc.chunk(), sc.maxContext()), vocab, -1, arrive, rows, resetSlots)) {
            if (!done.await(900, TimeUnit.SECONDS)) fail("the schedule did not finish in 900 s: " + serving.stats());
        }
        return got;
    }

    static Serving.Sink sink(Got g, CountDownLatch done) {
        return new Serving.Sink() {
            @Override
            public void prompt(List<Serving.TokenLogprob> entries) {
                g.entries.addAll(entries);
            }

            @Override
            public void token(int step, Serving.TokenLogprob token) {
                g.entries.add(token);
                g.ids.add(token.id());
            }

            @Override
            public void finished(Serving.Finish why, String detail) {
                g.finish = why;
                g.detail = detail;
                done.countDown();
            }
        };
    }

    /** Rows of {@code got} differing from {@code alone}: the logits row's bits, or the entry's id, logprob or alternatives. A missing row differs. */
    static int differing(Seq s, Alone alone, Got got, List<String> notes) {
        int bad = 0, n = alone.rows().size();
        if (got.finish != Serving.Finish.LENGTH) notes.add("finished " + got.finish + " (" + got.detail + "), not LENGTH");
        if (!Arrays.equals(alone.ids(), got.ids.stream().mapToInt(Integer::intValue).toArray())) notes.add("ids " + got.ids + " alone " + Arrays.toString(alone.ids()));
        for (int i = 0; i < n; i++) {
            if (i >= got.rows.size() || i >= got.entries.size()) {
                bad++;
                continue;
            }
            float[] want = alone.rows().get(i);
            Serving.TokenLogprob e = got.entries.get(i);
            Logprobs lp = new Logprobs(want, 0, want.length);
            int[] top = lp.top(s.top());
            float[] tl = new float[top.length];
            for (int j = 0; j < top.length; j++) tl[j] = lp.of(top[j]);
            boolean same = Arrays.equals(want, got.rows.get(i)) && Float.floatToRawIntBits(lp.of(e.id())) == Float.floatToRawIntBits(e.logprob())
                    && Arrays.equals(top, e.topIds()) && Arrays.equals(tl, e.topLogprobs());
            if (!same) bad++;
        }
        bad += Math.abs(got.rows.size() - n);
        if (got.entries.size() != n) notes.add(got.entries.size() + " entries, " + n + " rows alone");
        return bad > 0 || notes.isEmpty() ? bad : 1;
    }

    /**
     * Serves {@code schedules} through {@code step} and compares every sequence with its run alone, and the sequences
     * of the dump's prompt (the same array) with the dump's generated ids; {@return rows differing, rows compared}
     */
    static long[] judge(int[] dumpPrompt, int[] dumpIds, Engine engine, BatchStep step, boolean resetSlots, List<Schedule> schedules, List<String> notes)
            throws InterruptedException {
        Forward f = ApiInternals.get().forward(engine);
        int vocab = f.weights().embed().rows();
        long bad = 0, rows = 0;
        for (Schedule sc : schedules) {
            List<Alone> alone = sc.seqs().stream().map(s -> alone(f, s)).toList();
            List<Got> got = serve(step, sc, vocab, resetSlots);
            for (int i = 0; i < sc.seqs().size(); i++) {
                List<String> why = new ArrayList<>();
                bad += differing(sc.seqs().get(i), alone.get(i), got.get(i), why);
                int[] ids = got.get(i).ids.stream().mapToInt(Integer::intValue).toArray();
                if (sc.seqs().get(i).prompt() == dumpPrompt && !Arrays.equals(dumpIds, ids)) {
                    why.add("the dump's prompt gave " + Arrays.toString(ids) + ", the dump (k3 run) " + Arrays.toString(dumpIds));
                    bad++;
                }
                rows += alone.get(i).rows().size();
                if (!why.isEmpty() && notes.size() < 20) notes.add("schedule " + schedules.indexOf(sc) + " sequence " + i + ": " + String.join("; ", why));
            }
        }
        return new long[] {bad, rows};
    }

    static List<Schedule> schedules(JsonNode c, Engine engine, int[] prompt, int gen) {
        int vocab = ApiInternals.get().forward(engine).weights().embed().rows();
        List<Schedule> out = new ArrayList<>();
        for (int s = 0; s < need(c, "schedules"); s++) out.add(schedule(c, s, vocab, prompt, gen));
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("cases")
    void aSequenceHasTheBitsOfItsRunAloneWhateverRunsBesideIt(String name, JsonNode c) throws Exception {
        JsonNode dump = Project.json(Project.dump(c.path("dump").asText()).resolve("manifest.json"));
        int[] prompt = ints(dump.path("prompt_ids")), generated = ints(dump.path("generated_ids"));
        if (prompt.length == 0 || generated.length == 0) fail("the reference dump " + c.path("dump").asText() + " has no prompt_ids or generated_ids");
        try (Engine engine = open(c)) {
            Forward f = ApiInternals.get().forward(engine);
            int[] viaEngine = engine.generate(prompt, new Settings(Sampling.GREEDY, generated.length, false, true, 0), TokenListener.NONE).ids();
            assertArrayEquals(generated, viaEngine, "Engine.generate's greedy ids against the reference dump's (k3 run's)");
            List<Schedule> schedules = schedules(c, engine, prompt, generated.length);
            List<String> notes = new ArrayList<>();
            long[] r = judge(prompt, generated, engine, new BatchStep(f), true, schedules, notes);
            int sequences = schedules.stream().mapToInt(s -> s.seqs().size()).sum();
            Evidence.parameter("schedules", schedules.size() + " (" + sequences + " sequences; max active " + schedules.stream().map(s -> "" + s.maxActive()).toList()
                    + ", prefill chunks " + schedules.stream().map(s -> "" + s.chunk()).toList() + ")");
            Evidence.parameter("rows differing", r[0] + "/" + r[1]);
            assertTrue(r[1] > 0, "no rows were compared");
            assertTrue(r[0] <= need(c, "differing_rows"), r[0] + " of " + r[1] + " rows differ from the sequences' runs alone (allowed " + need(c, "differing_rows") + "):\n"
                    + String.join("\n", notes));
        }
    }

    /**
     * Serves the manifest's mutant case, its first schedule at the mutants' limits (several sequences at once, slots
     * reused), with one fault planted, and requires the gate's comparison to find rows differing while every
     * sequence ends normally: the fault shows as other bits, not as a failure.
     */
    static void mutantIsCaught(boolean batchReduction, boolean resetSlots, String fault) throws Exception {
        JsonNode m = manifest().path("mutants");
        JsonNode c = StreamSupport.stream(manifest().path("cases").spliterator(), false).filter(x -> x.path("name").asText().equals(m.path("case").asText()))
                .findFirst().orElseThrow(() -> new AssertionError("BatchInvarianceGate.json: the mutants' case is not among the cases"));
        JsonNode dump = Project.json(Project.dump(c.path("dump").asText()).resolve("manifest.json"));
        List<String> notes = new ArrayList<>();
        long[] r;
        try (Engine engine = open(c)) {
            Forward f = ApiInternals.get().forward(engine);
            int[] prompt = ints(dump.path("prompt_ids")), generated = ints(dump.path("generated_ids"));
            Schedule first = schedules(c, engine, prompt, generated.length).get(0);
            Schedule sc = new Schedule(need(m.path("schedule"), "max_active"), need(m.path("schedule"), "prefill_chunk"), first.maxContext(), first.seqs());
            assertTrue(sc.maxActive() > 1 && sc.seqs().size() > sc.maxActive(), "the mutants' schedule must run several sequences at once and reuse slots");
            r = judge(prompt, generated, engine, batchReduction ? PlantedStep.batchReduction(f) : new BatchStep(f), resetSlots, List.of(sc), notes);
        }
        Evidence.parameter("rows differing under the mutant", r[0] + "/" + r[1]);
        assertTrue(notes.stream().noneMatch(n -> n.contains("finished")), "the mutant's sequences must end normally, their bits differing: " + notes);
        assertTrue(r[0] > 0, fault + " went unnoticed");
    }

    @Test
    void aReductionAcrossTheBatchIsCaught() throws Exception {
        mutantIsCaught(true, true, "the final norm over every row of the step");
    }

    @Test
    void aSlotReusedWithoutResetIsCaught() throws Exception {
        mutantIsCaught(false, false, "a freed slot's KDA state reused as it was left");
    }

    static int[] ints(JsonNode a) {
        int[] out = new int[a.size()];
        for (int i = 0; i < out.length; i++) out[i] = a.get(i).asInt();
        return out;
    }
}
