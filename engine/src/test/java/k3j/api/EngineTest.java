package k3j.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import k3j.Repo;
import k3j.chat.Thinking;
import k3j.cli.CliRun;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Java API on the tiny oracle: a state saved and loaded continues like one longer run; a corrupted copy's report says where and that it does not conform. */
class EngineTest {
    private static final Path TINY = Repo.path("oracle-fixtures/tiny-k3");

    @Test
    void aSavedStateContinuesLikeOneLongerGeneration(@TempDir Path dir) {
        Settings five = Settings.greedy(5).withStopAtEos(false);
        try (Engine k3 = Engine.open(TINY, Plan.resident(), Engine.Options.DEFAULTS.withThreads(2))) {
            List<Integer> seen = new ArrayList<>();
            Generated first = k3.generate(new int[] {250, 17, 101}, five, (step, id, s) -> seen.add(id));
            assertEquals(5, first.ids().length);
            assertEquals(java.util.Arrays.stream(first.ids()).boxed().toList(), seen, "the listener saw every id as it was chosen");
            assertNotNull(first.state(), "an incremental generation returns its state");
            k3.saveState(dir.resolve("s.k3state"), first.state());
            State loaded = k3.loadState(dir.resolve("s.k3state"), 16);
            assertEquals(7, loaded.positions(), "3 prompt ids and 4 of the 5 generated were absorbed; the last is pending");
            Generated next = k3.generate(loaded, new int[] {42, 7}, five, TokenListener.NONE);
            int[] all = Engine.concat(Engine.concat(new int[] {250, 17, 101}, first.ids()), new int[] {42, 7});
            Generated once = k3.generate(all, five, TokenListener.NONE);
            assertArrayEquals(once.ids(), next.ids(), "continuing a loaded state = one run over everything");
            assertArrayEquals(once.firstLogits(), next.firstLogits(), "to the bit");
            Generated full = k3.generate(all, five.withIncremental(false), TokenListener.NONE);
            assertArrayEquals(once.ids(), full.ids(), "full recompute gives the same ids");
            assertEquals(null, full.state(), "full recompute carries no state");
        }
    }

    /** Settings, history and thinking are the API's own records (ApiStandsAloneTest checks every signature), checked by the engine's rules and shown in one line. */
    @Test
    void theApisOwnRecordsAreCheckedAndReadable() {
        History h = History.of(History.Message.system("be brief"), History.Message.user("hello"));
        assertEquals("History[2 message(s)]", h.toString());
        assertEquals("thinking on, effort max", Thinking.DEFAULT.toString());
        assertEquals("greedy", Sampling.GREEDY.toString());
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> new Thinking(true, "medium"));
        org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> History.of(History.Message.user("a"), History.Message.user("b")));
    }

    /** What the API returns in its own types: the model's widths, the plan it opened under, a chat reply and the positions the chat holds. */
    @Test
    void theEngineDescribesItselfAndChatsInItsOwnTypes() {
        try (Engine k3 = Engine.open(TINY, Plan.resident(), Engine.Options.DEFAULTS.withThreads(2).withTokenizer(TINY))) {
            ModelShape shape = k3.shape();
            assertEquals(13, shape.layers(), "every layer of the tiny oracle bound");
            assertEquals(k3.teacherForcedLogits(new int[] {250}).length, shape.vocabSize(), "one row of logits is the vocabulary");
            PlannedMemory plan = k3.plan();
            assertFalse(plan.trunkStreamed());
            assertEquals(plan.trunkBytes() + plan.modelTablesBytes() + plan.expertCacheBytes() + plan.recurrentStateBytes() + plan.buffersBytes() + plan.kvCacheBytes()
                    + plan.jvmBytes(), plan.totalBytes(), "the total is the parts");
            assertTrue(plan.toString().startsWith("PlannedMemory[total ") && !plan.toString().contains("\n"), plan.toString());
            Chat chat = k3.chat(History.of(History.Message.system("be brief")), Thinking.OFF, Sampling.GREEDY);
            assertEquals(0, chat.positions(), "no state before the first reply");
            List<Integer> shown = new ArrayList<>();
            Reply r = chat.reply("hello", 4, shown::add, () -> false);
            assertEquals(shown, java.util.Arrays.stream(r.generated()).boxed().toList(), "every generated id was shown as it was chosen");
            assertTrue(r.generated().length >= 1 && r.generated().length <= 4, r.toString());
            assertTrue(chat.positions() >= r.fed().length, "the state holds what was fed: " + chat.positions());
            assertEquals(3, chat.history().size(), "system, user, assistant");
            assertEquals(History.Role.ASSISTANT, r.message().role());
            assertEquals(chat.history().messages().get(2), r.message(), "the reply's message is the history's last");
            assertFalse(chat.text(r.generated()).contains("<|"), "the chat's markers are left out of the shown text");
            assertTrue(r.toString().startsWith("Reply[") && !r.toString().contains("\n"), r.toString());
        }
    }

    @Test
    void aCorruptedCopysReportNamesTheLayerAndDoesNotConform(@TempDir Path dir) {
        Path bad = dir.resolve("bad");
        CliRun c = CliRun.k3("corrupt", TINY.toString(), bad.toString(), "--corruption", "swap:4:self_attn.q_proj.weight,self_attn.k_proj.weight");
        assertEquals(0, c.exit(), c.err());
        Conform.Options o = Conform.Options.DEFAULTS.withThreads(2).withReference(null, List.of(Repo.path("reference-dumps")));
        try (Conform judge = Conform.model(bad, Plan.resident(), o)) {
            ConformReport r = judge.report(judge.all(), false);
            assertEquals(13, r.layers().size());
            assertEquals(List.of(4), r.failing().stream().map(ConformReport.Layer::layer).toList(), "each layer runs alone from the dump's inputs: only L4 fails");
            assertEquals(4, r.firstDivergence().layer());
            String first = r.firstDivergence().toString();
            assertTrue(first.startsWith("L4 KDA: [") && first.length() < 240 && !first.contains("\n") && !first.contains("StageMetric"), "one short line: " + first);
            String whole = r.toString();
            assertTrue(whole.contains("DOES NOT CONFORM") && whole.contains("first " + first) && !whole.contains("\n"), "one line: " + whole);
            assertTrue(r.verdict().startsWith("VERDICT: DOES NOT CONFORM ["), "the decision's line, its category: " + r.verdict());
            assertEquals(r.decision().line(), r.verdict());
            assertEquals(2, r.logits().size(), "full recompute and incremental");
            assertFalse(r.logits().get(0).conforms(), "the logits of the swapped model differ");
            assertFalse(r.conforms());
            assertEquals(Decision.Outcome.DOES_NOT_CONFORM, r.decision().outcome(), r.decision().text());
            assertEquals(List.of(4), r.layersWith(k3j.verdict.Finding.BINDING_ERROR), "the swap is a binding error, named by its finding");
            assertFalse(judge.plan() == null || judge.plan().totalBytes() <= 0, "the plan the model was opened under");
        }
        try (Conform judge = Conform.model(TINY, Plan.resident(), o)) {
            ConformReport r = judge.report(judge.all(), false);
            assertTrue(r.conforms() && r.failing().isEmpty() && r.greedy().conforms(), "the untouched model conforms");
            assertEquals(Decision.Outcome.CONFORMS, r.decision().outcome());
            assertTrue(r.greedy().ids().equal() && r.logits().get(1).comparison().ratioToBudget() < 1, r.toString());
        }
    }

    @Test
    void closeTwiceIsQuietAndANullListenerIsNamed() {
        Engine k3 = Engine.open(TINY, Plan.resident(), Engine.Options.DEFAULTS.withThreads(1));
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> k3.generate(new int[] {250, 17}, Settings.greedy(2), null));
        assertEquals("the token listener is null: pass id -> {} to ignore the tokens as they come", e.getMessage());
        k3.close();
        k3.close();
    }

    @Test
    void aMissingCandidateOrModelFileIsNamed(@TempDir Path dir) throws Exception {
        Conform.Options o = Conform.Options.DEFAULTS.withThreads(1).withReference(null, List.of(Repo.path("reference-dumps")));
        RuntimeException missing = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Conform.candidate(dir.resolve("missing.npz"), o).close());
        assertTrue(missing.getMessage().contains("no candidate dump at " + dir.resolve("missing.npz") + ": no such file or folder"), missing.getMessage());
        java.nio.file.Files.createDirectories(dir.resolve("empty"));
        RuntimeException noManifest = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Conform.candidate(dir.resolve("empty"), o).close());
        assertTrue(noManifest.getMessage().contains(dir.resolve("empty") + " holds no manifest.json: not a candidate dump"), noManifest.getMessage());
        java.nio.file.Files.writeString(dir.resolve("text.npz"), "this is text, not a zip");
        RuntimeException notZip = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Conform.candidate(dir.resolve("text.npz"), o).close());
        assertTrue(notZip.getMessage().contains("text.npz: not a zip file"), notZip.getMessage());
        java.nio.file.Files.createDirectories(dir.resolve("two"));
        java.nio.file.Files.writeString(dir.resolve("two/manifest.json"), "{\"format\": \"k3j-candidate\"}\n{\"format\": \"k3j-candidate\"}\n");
        RuntimeException two = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Conform.candidate(dir.resolve("two"), o).close());
        assertTrue(two.getMessage().contains("a second JSON value after the first, at line 2"), two.getMessage());
        assertFalse(two.getMessage().contains("jackson") || two.getMessage().contains("Deserialization") || two.getMessage().contains("JsonNode"), two.getMessage());
        java.nio.file.Files.createDirectories(dir.resolve("nomodel"));
        RuntimeException model = org.junit.jupiter.api.Assertions.assertThrows(RuntimeException.class, () -> Conform.model(dir.resolve("nomodel"), Plan.resident(), o).close());
        assertTrue(model.getMessage().contains(dir.resolve("nomodel").resolve("config.json").toString()), model.getMessage());
    }
}
