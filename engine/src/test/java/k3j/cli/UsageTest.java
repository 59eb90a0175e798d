package k3j.cli;

import static k3j.cli.CliRun.k3;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a new user types first: --help, a typo, a missing folder, a bad flag. Each answer is short and exits as documented. */
class UsageTest {
    @TempDir
    Path dir;

    @Test
    void everySubcommandAnswersHelpWithExitZero() {
        for (String sub : K3.commandLine().getSubcommands().keySet()) {
            CliRun r = k3(sub, "--help");
            assertEquals(ExitCode.OK, r.exit(), sub + " --help: " + r.err());
            assertTrue(r.out().contains("Usage: k3 " + sub), sub + ":\n" + r.out());
        }
        assertEquals(ExitCode.OK, k3("--help").exit());
    }

    @Test
    void aLineBuildsOnlyTheSubcommandItNamesYetHelpListsThemAll() {
        assertEquals(java.util.Set.of(), K3.needed("--version"));
        assertEquals(java.util.Set.of("run"), K3.needed("run", "M", "--ids", "1"));
        assertEquals(java.util.Set.of("sim-cache"), K3.needed("sim-cache", "--help"));
        assertEquals(K3.SUBCOMMANDS.keySet(), K3.needed("--help"));
        assertEquals(K3.SUBCOMMANDS.keySet(), K3.needed("--bogus"));
        assertEquals(K3.SUBCOMMANDS.keySet(), K3.commandLine().getSubcommands().keySet());
        CliRun help = k3("--help");
        for (String sub : K3.SUBCOMMANDS.keySet()) assertTrue(help.out().contains("  " + sub + " "), sub + " missing from --help:\n" + help.out());
        CliRun version = k3("--version");
        assertEquals(ExitCode.OK, version.exit(), version.err());
        assertEquals(K3.VERSION, version.out().strip());
    }

    @Test
    void anUnknownSubcommandIsNamedWithASuggestionAndExitsTwo() {
        CliRun typo = k3("inspct", "X");
        assertEquals(ExitCode.USAGE, typo.exit());
        assertTrue(typo.err().startsWith("k3: unknown command 'inspct'") && typo.err().contains("did you mean 'inspect'?"), typo.err());
        assertFalse(typo.err().contains("Unmatched argument") || typo.err().contains("Usage:"), typo.err());
        CliRun chat = k3("chat", "X");
        assertEquals(ExitCode.USAGE, chat.exit());
        assertTrue(chat.err().startsWith("k3: unknown command 'chat'"), chat.err());
    }

    @Test
    void aModelFolderFirstIsStillARun() {
        CliRun r = k3(RunCommandTest.tiny().toString(), "--ids", "1,2", "--gen", "1", "--out", dir.resolve("r.json").toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
        assertTrue(r.err().contains("generated ids: "), r.err());
    }

    @Test
    void aMissingModelFolderIsOneLineWithoutAJavaException() {
        for (String[] args : new String[][] {{"run", dir.resolve("nowhere").toString(), "--ids", "1"}, {dir.resolve("nowhere").toString(), "--ids", "1"},
                {"conform", dir.resolve("nowhere").toString()}, {"pack-trunk", dir.resolve("nowhere").toString(), dir.resolve("t").toString()}}) {
            CliRun r = k3(args);
            assertEquals(ExitCode.USAGE, r.exit(), String.join(" ", args));
            assertTrue(r.err().startsWith("k3: no such folder: " + dir.resolve("nowhere")), r.err());
            assertFalse(r.err().contains("Exception") || r.err().contains("DIFFERENT"), r.err());
            assertEquals(2, r.err().lines().count(), "the error and a pointer to --help:\n" + r.err());
        }
        CliRun empty = k3("run", dir.toString(), "--ids", "1");
        assertEquals(ExitCode.USAGE, empty.exit());
        assertTrue(empty.err().startsWith("k3: no config.json in " + dir), empty.err());
        assertFalse(empty.err().contains("Exception") || empty.err().contains("DIFFERENT"), empty.err());
    }

    @Test
    void aPathToConfigJsonIsTakenAsItsFolder() {
        CliRun r = k3("run", RunCommandTest.tiny().resolve("config.json").toString(), "--ids", "1,2", "--gen", "1", "--out", dir.resolve("c.json").toString());
        assertEquals(ExitCode.OK, r.exit(), r.err());
    }

    @Test
    void aUsageErrorIsAShortMessageAndAPointerToHelp() {
        CliRun r = k3("run", RunCommandTest.tiny().toString(), "--ids", "1", "--gen", "lots");
        assertEquals(ExitCode.USAGE, r.exit());
        assertEquals(2, r.err().lines().count(), r.err());
        assertTrue(r.err().contains("'k3 run --help'") && !r.err().contains("Usage:"), r.err());
        CliRun none = k3();
        assertEquals(ExitCode.USAGE, none.exit());
        assertTrue(none.err().contains("'k3 --help'"), none.err());
    }

    @Test
    void tokenizeRefusesBadIdsAndAMissingTokenizerThroughTheSharedUsagePath() throws Exception {
        String tiny = k3j.Repo.path("oracle-fixtures/tiny-k3").toString();
        Path ids = java.nio.file.Files.writeString(dir.resolve("ids.txt"), "1,2,999");
        CliRun bad = k3("tokenize", "--tok", tiny, "--decode", "--file", ids.toString());
        assertShortUsageError(bad, "tokenize", "k3: id 999 is outside");
        CliRun noTok = k3("tokenize", "--file", ids.toString());
        assertShortUsageError(noTok, "tokenize", "k3: Missing required argument(s): --tok=DIR");
    }

    @Test
    void compareLogitsRefusesThroughTheSharedUsagePath() throws Exception {
        Path dump = k3j.Repo.path("reference-dumps/mini-k3-93");
        Path shortFile = java.nio.file.Files.write(dir.resolve("short.bin"), new byte[12]);
        assertShortUsageError(k3("compare-logits", shortFile.toString(), "--reference", dump.toString()), "compare-logits", "k3: refused: ");
        assertShortUsageError(k3("compare-logits", shortFile.toString(), "--reference", dir.resolve("nowhere").toString()), "compare-logits", "k3: ");
        assertShortUsageError(k3("compare-logits", shortFile.toString()), "compare-logits", "k3: Missing required option: '--reference=REF'");
        assertShortUsageError(k3("compare-logits", shortFile.toString(), "--reference", dump.toString(), "--position", "100000"), "compare-logits",
                "k3: --position 100000 is outside the reference's 0..");
    }

    /** Exit 2, the message on the first line and the pointer to the subcommand's --help on the second; nothing else. */
    static void assertShortUsageError(CliRun r, String sub, String starts) {
        assertEquals(ExitCode.USAGE, r.exit(), r.out() + r.err());
        assertTrue(r.err().startsWith(starts), r.err());
        assertEquals(2, r.err().lines().count(), r.err());
        assertTrue(r.err().contains("Try 'k3 " + sub + " --help'") && !r.err().contains("Exception") && !r.err().contains("Usage:"), r.err());
    }
}
