package k3j.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import k3j.Repo;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code k3 --chat} through its real input loop (lines piped to its stdin in its own JVM): /save then /reset then
 * a new turn never overwrites the saved conversation, an unknown slash command is refused with the list and never
 * reaches the model, "//" sends a message that starts with '/', and the headers count prompt tokens by that name.
 */
class ChatCommandsTest {
    private static final String TINY = Repo.path("oracle-fixtures/tiny-k3").toString();

    @Test
    void resetNeverOverwritesASavedConversationAndUnknownCommandsAreRefused(@TempDir Path dir) throws Exception {
        Path h = dir.resolve("h.jsonl"), s = dir.resolve("s.k3state");
        ChildK3 r = ChatCommandsTest.chat(dir, "hello\n/save\n/reset\nagain\n/helpme\n//slash\n", "--history", h.toString(), "--save-state", s.toString());
        assertEquals(ExitCode.OK, r.exit(), "a refused command is said, and does not change the exit code of a conversation that went on:\n" + r.err());
        String first = Files.readString(h), second = Files.readString(dir.resolve("h-2.jsonl"));
        assertEquals(2, first.lines().count(), "the saved conversation keeps its user message and reply:\n" + first);
        assertTrue(first.contains("\"hello\"") && !first.contains("again"), "/reset then a turn did not overwrite " + h + ":\n" + first);
        assertTrue(second.contains("\"again\"") && !second.contains("hello"), "the conversation after /reset went to h-2.jsonl:\n" + second);
        assertTrue(second.contains("\"/slash\""), "//slash sends /slash:\n" + second);
        assertFalse(first.contains("helpme") || second.contains("helpme"), "/helpme never reached the model");
        assertTrue(r.err().contains("k3: unknown command /helpme (not sent to the model); the commands are /help, /reset, /save, /quit"), r.err());
        assertTrue(r.err().contains("h.jsonl keeps the conversation before, this one is saved to " + dir.resolve("h-2.jsonl")), r.err());
        assertTrue(Files.exists(s) && Files.exists(dir.resolve("s-2.k3state")), "the state of each conversation kept apart");
        assertTrue(r.err().contains("  chat     : 0 message(s) in the history; each reply at most 4 tokens"), r.err());
        assertFalse(r.err().contains("  prompt   :"), "no prompt count in a chat's header: each turn counts its own\n" + r.err());
        assertTrue(r.err().matches("(?s).*k3: turn 1: prompt \\d+ tokens \\(fed to the model\\).*"), r.err());

        ChildK3 resumed = ChatCommandsTest.chat(dir, "more\n", "--history", h.toString(), "--load-state", s.toString());
        assertEquals(0, resumed.exit(), "the first conversation's files still go together:\n" + resumed.err());
        assertTrue(resumed.err().contains("k3: resumed "), resumed.err());
        assertTrue(resumed.err().contains("  chat     : 2 message(s) in the history, continuing the state in " + s), resumed.err());
    }

    @Test
    void aDanglingLinkIsANameTakenAndANulLineIsRefusedAtInput(@TempDir Path dir) throws Exception {
        Path h = dir.resolve("h.jsonl"), dangling = dir.resolve("h-2.jsonl");
        Files.createSymbolicLink(dangling, dir.resolve("gone.jsonl"));
        ChildK3 r = ChatCommandsTest.chat(dir, "hello\n/save\n/reset\nagain\n", "--history", h.toString());
        assertEquals(0, r.exit(), r.err());
        assertTrue(r.err().contains("this one is saved to " + dir.resolve("h-3.jsonl")), "after /reset the next free name is h-3.jsonl:\n" + r.err());
        assertTrue(Files.isSymbolicLink(dangling) && !Files.exists(dir.resolve("gone.jsonl")), "the dangling link is neither followed nor replaced");
        assertTrue(Files.readString(dir.resolve("h-3.jsonl")).contains("\"again\""));

        Path n = dir.resolve("n.jsonl");
        ChildK3 nul = ChatCommandsTest.chat(dir, "hello\na\u0000b\n", "--history", n.toString());
        assertEquals(ExitCode.USAGE, nul.exit(), nul.err());
        assertTrue(nul.err().contains("k3: the message contains NUL: refused, not sent"), nul.err());
        ChildK3 again = ChatCommandsTest.chat(dir, "more\n", "--history", n.toString());
        assertEquals(0, again.exit(), "--history reads back its own file:\n" + again.err());
        assertFalse(Files.readString(n).contains("\\u0000"), "no NUL was saved");
    }

    /**
     * A turn cut by SIGINT or SIGTERM while its reply streams is kept, as {@code run --out} keeps its ids: the history
     * holds the user message and the reply so far marked {@code "interrupted": true}, stderr says so, and the exit is the
     * signal's. Loaded again, the history's cut reply is named on stderr, kept marked, and followed by the next turn.
     */
    @Test
    void aTurnCutBySigintOrSigtermIsKept(@TempDir Path dir) throws Exception {
        for (var c : List.of(new Object[] {"INT", ExitCode.INTERRUPTED}, new Object[] {"TERM", ExitCode.TERMINATED})) {
            String signal = (String) c[0];
            Path h = dir.resolve(signal + ".jsonl");
            Signalled r = Signalled.run(dir, signal, (out, err) -> out.length() >= 2, TINY, "--tok", TINY, "--chat", "--think", "off", "--gen", "4000",
                    "--prompt", "hello", "--history", h.toString());
            assertEquals((int) c[1], r.exit(), "SIG" + signal + ": " + r.err());
            assertTrue(r.err().contains("k3: interrupted by SIG" + signal + ": the reply was cut after"), r.err());
            String saved = Files.readString(h);
            List<String> lines = saved.lines().toList();
            assertEquals(2, lines.size(), "the turn is kept:\n" + saved);
            assertEquals("{\"role\":\"user\",\"content\":\"hello\"}", lines.get(0), saved);
            assertTrue(lines.get(1).startsWith("{\"role\":\"assistant\",\"content\":\"") && lines.get(1).endsWith(",\"interrupted\":true}"),
                    "the cut reply is kept, marked interrupted:\n" + saved);
            assertTrue(r.err().contains("its reply marked \"interrupted\""), r.err());
            // loaded again: the mark is said, kept, and the next turn follows the cut reply (never continues it)
            ChildK3 next = chat(dir, "more\n", "--history", h.toString());
            assertEquals(ExitCode.OK, next.exit(), next.err());
            assertTrue(next.err().contains("k3: note: " + h + ":2: this reply was interrupted"), next.err());
            List<String> after = Files.readString(h).lines().toList();
            assertEquals(4, after.size(), String.join("\n", after));
            assertEquals(lines.get(1), after.get(1), "the cut reply stays as cut and marked");
            assertEquals("{\"role\":\"user\",\"content\":\"more\"}", after.get(2));
            assertFalse(after.get(3).contains("\"interrupted\""), "a reply ended by --gen is not interrupted: " + after.get(3));
        }
    }

    private static ChildK3 chat(Path dir, String stdin, String... more) {
        String[] a = new String[8 + more.length];
        System.arraycopy(new String[] {TINY, "--tok", TINY, "--chat", "--think", "off", "--gen", "4"}, 0, a, 0, 8);
        System.arraycopy(more, 0, a, 8, more.length);
        return ChildK3.run(dir, stdin, a);
    }
}
