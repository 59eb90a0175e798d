package k3j.cli;

import static k3j.cli.CliRun.k3;
import static k3j.cli.UsageTest.assertShortUsageError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every refusal names the thing that is wrong and the fix, and comes before anything is loaded: a mistyped flag gets a
 * suggestion (and its value is not taken for a second unknown word), every subcommand answers --version, a layer the
 * model does not have is refused before the plan prints, and each message below says what to do.
 */
class MessagesTest {
    private static final String MINI = k3j.Repo.path("oracle-fixtures/mini-k3-93").toString();
    private static final String MINI_DUMP = k3j.Repo.path("reference-dumps/mini-k3-93").toString();
    private static final String TINY = k3j.Repo.path("oracle-fixtures/tiny-k3").toString();

    @TempDir
    Path dir;

    @Test
    void aMistypedFlagIsNamedAloneWithTheFlagItWasMeantToBe() {
        CliRun r = k3("conform", MINI, "--layer", "3");
        assertShortUsageError(r, "conform", "k3: Unknown option '--layer'; did you mean '--layers'?");
        assertFalse(r.err().contains("'3'"), "the value is not an unknown option:\n" + r.err());
        assertShortUsageError(k3("conform", MINI, "--layres=3"), "conform", "k3: Unknown option '--layres'; did you mean '--layers'?");
        assertShortUsageError(k3(TINY, "--ids", "1", "--gne", "3"), "run", "k3: Unknown option '--gne'; did you mean '--gen'?");
        CliRun far = k3("conform", MINI, "--frobnicate");
        assertShortUsageError(far, "conform", "k3: Unknown option '--frobnicate'");
        assertFalse(far.err().contains("did you mean"), "no suggestion when nothing is close:\n" + far.err());
    }

    /** Other engines' names for the options get k3's name (the nearest spelling of "--temp" is "--help", of "--max-tokens" nothing). */
    @Test
    void anotherEnginesNameForAnOptionGetsK3sName() {
        for (String[] c : new String[][] {{"--temp", "--temperature"}, {"--tokens", "--gen"}, {"--max-tokens", "--gen"}, {"--max-new-tokens", "--gen"},
                {"--tokenizer", "--tok"}}) {
            assertShortUsageError(k3(TINY, "--ids", "1", c[0], "7"), "run", "k3: Unknown option '" + c[0] + "'; did you mean '" + c[1] + "'?");
        }
        CliRun ref = k3("bisect", MINI, "--ref", MINI_DUMP);
        assertShortUsageError(ref, "bisect", "k3: Unknown option '--ref'; did you mean '--reference'?");
        assertFalse(ref.err().contains("Missing"), "an unknown option, not a missing --reference:\n" + ref.err());
    }

    @Test
    void everySubcommandAnswersVersion() {
        for (String sub : K3.commandLine().getSubcommands().keySet()) {
            for (String flag : new String[] {"--version", "-V"}) {
                CliRun r = k3(sub, flag);
                assertEquals(ExitCode.OK, r.exit(), sub + " " + flag + ": " + r.err());
                assertEquals(K3.VERSION, r.out().strip(), sub + " " + flag);
            }
        }
        assertEquals(K3.VERSION, k3("--version").out().strip());
    }

    @Test
    void aLayerTheModelDoesNotHaveIsRefusedBeforeThePlanOrAnyWeight() {
        for (String[] args : new String[][] {{"conform", MINI, "--layers", "99"}, {"bisect", MINI, "--reference", MINI_DUMP, "--layers", "90-99"},
                {"conform", MINI, "--layers", "3-x"}}) {
            CliRun r = k3(args);
            assertShortUsageError(r, args[0], "k3: layer selection '" + args[args.length - 1] + "'");
            assertEquals("", r.out(), "nothing planned or run before the refusal:\n" + r.out());
        }
        assertTrue(k3("conform", MINI, "--layers", "99").err().contains("outside 0-92"));
    }

    @Test
    void anEmptyLayerListOrOutputPathIsSaidAsEmpty() {
        CliRun layers = k3("conform", MINI, "--layers", "");
        assertShortUsageError(layers, "conform", "k3: --layers '' names no layer: give layers like 0-92 or 40,41, or leave --layers out to check all 93");
        assertEquals("", layers.out(), "nothing planned or run:\n" + layers.out());
        CliRun out = k3(TINY, "--ids", "1", "--gen", "1", "--out", "");
        assertEquals(ExitCode.USAGE, out.exit(), out.err());
        assertTrue(out.err().contains("cannot write '' (--out): the path is empty: name a file or folder"), out.err());
        assertFalse(out.err().contains("directory") || out.err().contains("a folder;"), out.err());
    }

    @Test
    void aCorruptionSpecNamesItsBadFieldAndAMaskMayBeHex() throws Exception {
        String out = dir.resolve("copy").toString();
        CliRun bad = k3("corrupt", MINI, out, "--corruption", "byte:30:5:w2_packed:3:zz");
        assertShortUsageError(bad, "corrupt", "k3: bad corruption 'byte:30:5:w2_packed:3:zz': MASK is 'zz'; it must be a byte mask 1..255, in decimal (16) or hex (0x10)");
        assertShortUsageError(k3("corrupt", MINI, out, "--corruption", "byte:x:5:w2_packed:3:16"), "corrupt", "k3: bad corruption 'byte:x:5:w2_packed:3:16': L is 'x'");
        assertShortUsageError(k3("corrupt", MINI, out, "--corruption", "byte:30:5:w2_packed:3"), "corrupt",
                "k3: bad corruption 'byte:30:5:w2_packed:3': byte takes byte:L:EXPERT:PART:INDEX:MASK");
        assertFalse(Files.exists(Path.of(out)), "nothing written for a refused spec");
        CliRun hex = k3("corrupt", MINI, out, "--corruption", "byte:30:5:w2_packed:3:0x10");
        assertEquals(ExitCode.OK, hex.exit(), hex.err());
        assertTrue(hex.out().contains("byte:30:5:w2_packed:3:16"), "the mask 0x10 is 16:\n" + hex.out());
    }

    @Test
    void aMissingTokenizerFolderOrLogitFileIsCalledMissing() {
        CliRun tok = k3("tokenize", "--tok", dir.resolve("NODIR").toString(), "--file", TINY + "/config.json");
        assertShortUsageError(tok, "tokenize", "k3: --tok " + dir.resolve("NODIR") + ": no such folder (give --tok the folder holding tiktoken.model and tokenizer_config.json)");
        CliRun logits = k3("compare-logits", dir.resolve("MISSING.logits").toString(), "--reference", MINI_DUMP);
        assertShortUsageError(logits, "compare-logits", "k3: " + dir.resolve("MISSING.logits") + ": no such file or folder (FILE): check the path");
    }

    @Test
    void logitsOfAnotherPromptPointAtThePrompt() throws Exception {
        Path other = dir.resolve("other.logits");
        CliRun run = k3(MINI, "--ids", "9,8,7,6,5", "--gen", "1", "--dump-logits", other.toString(), "--out", dir.resolve("r.json").toString());
        assertEquals(ExitCode.OK, run.exit(), run.err());
        CliRun r = k3("compare-logits", other.toString(), "--reference", MINI_DUMP);
        assertEquals(ExitCode.RUNTIME, r.exit(), r.out() + r.err());
        assertTrue(r.out().contains("VERDICT: DOES NOT CONFORM [binding error]"), r.out());
        assertTrue(r.out().contains("check the prompt first") && r.out().contains("the 8 ids 150,17,101,3,149,64,128,42 at position 7"), r.out());
        Path same = dir.resolve("same.logits");
        assertEquals(ExitCode.OK, k3(MINI, "--ids", "150,17,101,3,149,64,128,42", "--gen", "1", "--dump-logits", same.toString(),
                "--out", dir.resolve("s.json").toString()).exit());
        CliRun ok = k3("compare-logits", same.toString(), "--reference", MINI_DUMP);
        assertEquals(ExitCode.OK, ok.exit(), ok.out());
        assertFalse(ok.out().contains("check the prompt"), ok.out());
    }

    @Test
    void chatOnlyFlagsWithoutChatAreRefusedLikeSystem() {
        for (String[] flag : new String[][] {{"--effort", "low"}, {"--think", "off"}, {"--system", "be brief"}}) {
            CliRun r = k3(TINY, "--ids", "1,2", "--gen", "1", flag[0], flag[1]);
            assertShortUsageError(r, "run", "k3: " + flag[0] + " needs --chat");
        }
    }

    @Test
    void screenshotWithoutArgumentsPrintsItsUsage() throws Exception {
        Process p = new ProcessBuilder(k3j.Repo.path("ci/screenshot").toString()).redirectErrorStream(true).start();
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        String text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(2, p.exitValue(), text);
        assertTrue(text.startsWith("usage: ci/screenshot OUT.png [URL]") && !text.contains("line "), text);
    }
}
