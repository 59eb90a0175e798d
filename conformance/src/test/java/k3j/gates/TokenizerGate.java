package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.EncodingType;
import io.qameta.allure.Epic;
import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import k3j.harness.Evidence;
import k3j.harness.Project;
import k3j.harness.TokenizerFixtures;
import k3j.harness.TokenizerFixtures.Case;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.TokenizerException;
import k3j.tokenizer.Utf8Stream;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfEnvironmentVariable;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The tokenizer gives the ids of an independent oracle (tiktoken 0.14.0, the fixtures of
 * oracle-fixtures/tokenizer) on real public vocabularies, under their own split patterns and under Kimi's with the
 * K3 added-token layout; it agrees with a second Java encoder (jtokkit); it decodes every file of this repository
 * back to the same bytes; its streamed output never splits a UTF-8 sequence; and it refuses malformed files by line.
 */
@Tag("tokenizer")
@Epic("tokenizer")
class TokenizerGate {

    static Stream<Case> cases() {
        return TokenizerFixtures.cases().stream();
    }

    @DisplayName("oracle parity")
    @ParameterizedTest(name = "{0}", quoteTextArguments = false)
    @MethodSource("cases")
    void idsAreTheOracles(Case c) {
        Tokenizer tok = TokenizerFixtures.tokenizer(c.vocab(), c.pattern());
        int[] ids = tok.encode(c.text(), c.addedTokens());
        Evidence.parameter("bytes", c.text().length);
        Evidence.parameter("ids", c.ids().length);
        if (!Arrays.equals(c.ids(), ids)) {
            Evidence.text("expected (tiktoken)", Arrays.toString(c.ids()));
            Evidence.text("encoded", Arrays.toString(ids));
            fail(c.name() + ": ids differ from the oracle's at index " + Arrays.mismatch(c.ids(), ids));
        }
        assertArrayEquals(c.text(), tok.decode(ids), "decode(encode(text)) is the text, byte for byte");
    }

    @Test
    @DisplayName("the fixtures cover every required kind of text, each vocabulary, pattern and added-token setting")
    void fixturesCoverTheRequiredText() {
        List<Case> all = TokenizerFixtures.cases();
        for (String kind : List.of("han", "japanese", "korean", "cyrillic", "arabic", "devanagari", "thai", "emoji-zwj", "emoji-skin", "combining",
                "contractions-upper", "contractions-mixed", "digits", "crlf", "mixed-newlines", "tabs-trailing", "source-java", "json",
                "invalid-truncated", "invalid-overlong", "invalid-surrogate", "specials-each")) {
            for (String vocab : TokenizerFixtures.vocabularies()) {
                for (String setting : List.of("/own/text/", "/kimi/text/", "/kimi/added/")) {
                    String name = vocab + setting + kind;
                    assertTrue(all.stream().anyMatch(c -> c.name().equals(name)), "no fixture case " + name);
                }
            }
        }
        Case asText = find(all, "o200k_base/kimi/text/specials-each"), asControl = find(all, "o200k_base/kimi/added/specials-each");
        int nBase = TokenizerFixtures.tokenizer("o200k_base", "kimi").nBase();
        assertTrue(Arrays.stream(asText.ids()).allMatch(id -> id < nBase), "added tokens off: a special written in text is ordinary BPE");
        assertEquals(16, Arrays.stream(asControl.ids()).filter(id -> id >= nBase).count(), "added tokens on: each of the 16 K3 specials is one id");
    }

    private static Case find(List<Case> all, String name) {
        return all.stream().filter(c -> c.name().equals(name)).findFirst().orElseGet(() -> fail("no fixture case " + name));
    }

    static Stream<Arguments> vocabularies() {
        return TokenizerFixtures.vocabularies().stream().map(Arguments::of);
    }

    @DisplayName("every repository file round-trips byte for byte")
    @ParameterizedTest(name = "{0}")
    @MethodSource("vocabularies")
    void everyRepositoryFileRoundTrips(String vocab) {
        long bytes = 0, ids = 0;
        List<Path> files = TokenizerFixtures.repositoryTextFiles();
        for (String pattern : List.of("own", "kimi")) {
            Tokenizer tok = TokenizerFixtures.tokenizer(vocab, pattern);
            for (Path f : files) {
                byte[] b = TokenizerFixtures.read(f);
                int[] enc = tok.encode(b, false);
                if (!Arrays.equals(b, tok.decode(enc))) fail(f + ": " + vocab + "/" + pattern + " does not round-trip");
                bytes += b.length;
                ids += enc.length;
            }
        }
        Evidence.parameter("files", files.size());
        Evidence.parameter("bytes", bytes);
        Evidence.parameter("ids", ids);
    }

    @DisplayName("the Kimi pattern's hand-written scanner gives the ids of the pattern run as a regex, on every repository file and fixture text")
    @ParameterizedTest(name = "{0}")
    @MethodSource("vocabularies")
    void kimiScannerIsTheRegex(String vocab) {
        Tokenizer scanner = TokenizerFixtures.tokenizer(vocab, "kimi");
        Tokenizer regex = Tokenizer.of(TokenizerFixtures.ranks(vocab),
                k3j.tokenizer.AddedTokens.read(Project.fixture("tokenizer/" + vocab + ".tokenizer_config.json"), scanner.nBase()),
                "(?:" + k3j.tokenizer.SplitPattern.KIMI + ")");   // another spelling of the same pattern: the regex path
        int texts = 0;
        for (Path f : TokenizerFixtures.repositoryTextFiles()) {
            byte[] b = TokenizerFixtures.read(f);
            assertArrayEquals(regex.encode(b, false), scanner.encode(b, false), f + ": scanner and regex differ");
            texts++;
        }
        for (Case c : TokenizerFixtures.cases()) {
            if (!c.vocab().equals(vocab)) continue;
            assertArrayEquals(regex.encode(c.text(), false), scanner.encode(c.text(), false), c.name() + ": scanner and regex differ");
            texts++;
        }
        Evidence.parameter("texts", texts);
    }

    @DisplayName("jtokkit, a second Java encoder, gives the same ids under the vocabulary's own pattern")
    @ParameterizedTest(name = "{0}")
    @MethodSource("vocabularies")
    void jtokkitAgrees(String vocab) {
        var jt = Encodings.newDefaultEncodingRegistry().getEncoding(EncodingType.fromName(vocab).orElseThrow());
        Tokenizer tok = TokenizerFixtures.tokenizer(vocab, "own");
        int texts = 0;
        for (Path f : TokenizerFixtures.repositoryTextFiles()) {
            String s = strict(TokenizerFixtures.read(f));
            if (s == null) continue;
            assertArrayEquals(jt.encodeOrdinary(s).toArray(), tok.encode(s, false), f + ": differs from jtokkit");
            texts++;
        }
        for (Case c : TokenizerFixtures.cases()) {
            String s = strict(c.text());
            if (s == null || !c.vocab().equals(vocab)) continue;
            assertArrayEquals(jt.encodeOrdinary(s).toArray(), tok.encode(s, false), c.name() + ": differs from jtokkit");
            texts++;
        }
        Evidence.parameter("texts", texts);
    }

    /** The text when it is well-formed UTF-8, else null. */
    private static String strict(byte[] b) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    @Test
    @DisplayName("streamed decoding never splits a UTF-8 sequence and loses no byte")
    void streamedOutputKeepsCharactersWhole() {
        int checked = 0;
        for (Case c : TokenizerFixtures.cases()) {
            Tokenizer tok = TokenizerFixtures.tokenizer(c.vocab(), c.pattern());
            boolean wellFormed = strict(c.text()) != null;
            Utf8Stream stream = new Utf8Stream();
            ByteArrayOutputStream all = new ByteArrayOutputStream();
            for (int id : c.ids()) {
                byte[] shown = stream.push(tok.bytes(id));
                if (wellFormed && strict(shown) == null) fail(c.name() + ": a streamed chunk splits a character: " + Arrays.toString(shown));
                all.writeBytes(shown);
            }
            all.writeBytes(stream.finish());
            assertArrayEquals(c.text(), all.toByteArray(), c.name() + ": the stream lost or changed bytes");
            checked++;
        }
        Evidence.parameter("cases", checked);
    }

    static Stream<Arguments> malformedRanks() {
        return Stream.of(
                Arguments.of("no space", "IQ== 0\nIg==1\n", ":2: no space"),
                Arguments.of("two spaces", "IQ== 0\nIg==  1\n", ":2: more than one space"),
                Arguments.of("bad base64", "IQ== 0\nI*g== 1\n", ":2: bad base64"),
                Arguments.of("rank not a number", "IQ== 0\nIg== one\n", ":2: rank 'one' is not a decimal integer"),
                Arguments.of("negative rank", "IQ== -1\n", ":1: rank -1 outside"),
                Arguments.of("rank twice", "IQ== 0\nIg== 0\n", ":2: rank 0 given twice"),
                Arguments.of("rank missing", "IQ== 0\nIg== 2\n", "rank 1 is missing"),
                Arguments.of("empty token", "IQ== 0\n 1\n", ":2: empty token"),
                Arguments.of("empty file", "\n\n", "no tokens"),
                Arguments.of("bytes twice", "IQ== 0\nIQ== 1\n", "duplicate token bytes at ranks 0 and 1"),
                Arguments.of("token too long", "IQ== 0\n" + "QUFB".repeat(171) + " 1\n", ":2: token of 513 bytes"));
    }

    @DisplayName("a malformed tiktoken.model is refused with its line")
    @ParameterizedTest(name = "{0}")
    @MethodSource("malformedRanks")
    void malformedRanksAreRefused(String name, String content, String expected, @TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve(Tokenizer.RANKS_FILE), content);
        Files.writeString(dir.resolve(Tokenizer.CONFIG_FILE), "{\"added_tokens_decoder\": {}}");
        refused(dir, expected);
    }

    static Stream<Arguments> malformedConfigs() {
        return Stream.of(
                Arguments.of("not an object", "[1]", ":1: the file must be one JSON object"),
                Arguments.of("no added tokens", "{\n\"x\": 1\n}", "no added_tokens_decoder"),
                Arguments.of("added tokens not an object", "{\n\"added_tokens_decoder\": [1]\n}", ":2: added_tokens_decoder must be an object"),
                Arguments.of("id below the reserved range", "{\"added_tokens_decoder\": {\n\"1\": {\"content\": \"x\"}}}", ":2: id 1 outside the reserved ids [2, 258)"),
                Arguments.of("id above it", "{\"added_tokens_decoder\": {\n\n\"258\": {\"content\": \"x\"}}}", ":3: id 258 outside"),
                Arguments.of("key not decimal", "{\"added_tokens_decoder\": {\n\"0x2\": {\"content\": \"x\"}}}", ":2: key '0x2' is not a decimal id"),
                Arguments.of("no content", "{\"added_tokens_decoder\": {\n\"2\": {\"special\": true}}}", ":2: id 2: no content"),
                Arguments.of("content not a string", "{\"added_tokens_decoder\": {\n\"2\": {\"content\": 5}}}", ":2: id 2: content must be a string"),
                Arguments.of("special not a boolean", "{\"added_tokens_decoder\": {\n\"2\": {\"content\": \"x\", \"special\": \"yes\"}}}", ":2: id 2: special must be true or false"),
                Arguments.of("id twice", "{\"added_tokens_decoder\": {\"2\": {\"content\": \"x\"},\n\"2\": {\"content\": \"y\"}}}", ":2: id 2 given twice"),
                Arguments.of("content twice", "{\"added_tokens_decoder\": {\"2\": {\"content\": \"x\"},\n\"3\": {\"content\": \"x\"}}}", ":2: content 'x' given to ids 2 and 3"),
                Arguments.of("not JSON", "{\"added_tokens_decoder\": {\n\n\"2\": {\"content\": \"x\",}}}", ":3: not JSON"),
                Arguments.of("data after the object", "{\"added_tokens_decoder\": {}}\n{}", ":2: data after the JSON object"));
    }

    @DisplayName("a malformed tokenizer_config.json is refused with its line")
    @ParameterizedTest(name = "{0}")
    @MethodSource("malformedConfigs")
    void malformedConfigsAreRefused(String name, String content, String expected, @TempDir Path dir) throws Exception {
        Files.writeString(dir.resolve(Tokenizer.RANKS_FILE), "IQ== 0\nIg== 1\n");
        Files.writeString(dir.resolve(Tokenizer.CONFIG_FILE), content);
        refused(dir, expected);
    }

    private static void refused(Path dir, String expected) {
        TokenizerException e = assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        Evidence.text("refusal", e.getMessage());
        assertTrue(e.getMessage().contains(expected), "refusal '" + e.getMessage() + "' does not say '" + expected + "'");
    }

    @Test
    @DisplayName("the tiny oracle model's byte-level tokenizer encodes text as bytes and knows the chat tokens")
    void tinyModelTokenizer() {
        Tokenizer tok = Tokenizer.load(Project.fixture("tiny-k3"));
        assertEquals(250, tok.nBase());
        assertArrayEquals(new int[] {104, 101, 108, 108, 111}, tok.encode("hello", true));
        byte[] mixed = "héllo 世界 👋 <|open|>".getBytes(StandardCharsets.UTF_8);
        assertArrayEquals(mixed, tok.decode(tok.encode(mixed, true)));
        for (String special : List.of("[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>")) {
            assertTrue(tok.addedId(special).orElse(Integer.MAX_VALUE) < 256, special + " must fit the tiny model's 256 ids");
        }
        TokenizerException e = assertThrows(TokenizerException.class, () -> tok.encode(new byte[] {'a', (byte) 0xFF}, false));
        assertTrue(e.getMessage().contains("0xFF"), e.getMessage());
    }

    @Test
    @EnabledIfEnvironmentVariable(named = "K3_TOK", matches = ".+")
    @DisplayName("the real Kimi tokenizer (K3_TOK=DIR) gives the known ids of a known prompt")
    void realKimiTokenizer() {
        Tokenizer tok = Tokenizer.load(Path.of(System.getenv("K3_TOK")));
        assertEquals(163584, tok.nBase());
        assertArrayEquals(new int[] {1008, 10484, 318, 15383, 387}, tok.encode("The capital of France is", true));
        assertEquals(163586, tok.addedId("<|end_of_msg|>").orElse(-1));
        assertEquals(163585, tok.addedId("[EOS]").orElse(-1));
    }
}
