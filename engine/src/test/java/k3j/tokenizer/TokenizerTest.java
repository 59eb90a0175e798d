package k3j.tokenizer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.junit.jupiter.api.Test;

class TokenizerTest {
    /** Bytes a..e, then merges "ab" (5), "cd" (6), "abcd" (7), "bc" (8) — "bc" ranks after "ab", so "abcd" wins. */
    private static Tokenizer small() {
        String[] toks = {"a", "b", "c", "d", "e", "ab", "cd", "abcd", "bc"};
        byte[][] ranks = new byte[toks.length][];
        for (int i = 0; i < toks.length; i++) ranks[i] = toks[i].getBytes(StandardCharsets.US_ASCII);
        AddedToken[] added = new AddedToken[AddedTokens.RESERVED];
        for (int i = 0; i < added.length; i++) added[i] = new AddedToken(toks.length + i, i == 0 ? "<x>" : i == 1 ? "<xy>" : "<|reserved_token_" + (toks.length + i) + "|>", true);
        return Tokenizer.of(ranks, added, "\\S+|\\s+");
    }

    @Test
    void mergesTheLowestRankedPairFirst() {
        assertArrayEquals(new int[] {7}, small().encode("abcd", false));
        assertArrayEquals(new int[] {5, 2}, small().encode("abc", false));   // ab (5) before bc (8)
        assertArrayEquals(new int[] {8}, small().encode("bc", false));
        assertArrayEquals(new int[] {4, 5, 4}, small().encode("eabe", false));
    }

    @Test
    void addedTokensLongestFirstOnlyWhenAllowed() {
        Tokenizer t = small();
        assertArrayEquals(new int[] {0, 10, 9}, t.encode("a<xy><x>", true));
        assertEquals("a<xy><x>", new String(t.decode(new int[] {0, 10, 9}), StandardCharsets.UTF_8));
        assertEquals("byte 0x3C at offset 1 has no token in this vocabulary",
                org.junit.jupiter.api.Assertions.assertThrows(TokenizerException.class, () -> t.encode("a<x>", false)).getMessage());
    }

    @Test
    void translatesTiktokenRegexDialect() {
        assertEquals("\\p{IsHan}+|a\\z|[$]|\\$", SplitPattern.translate("\\p{Han}+|a$|[$]|\\$"));
    }

    @Test
    void invalidBytesAreUnitsOfTheirOwn() {
        Utf8.Decoded d = Utf8.decode(new byte[] {'a', (byte) 0xE4, (byte) 0xB8, 'b', (byte) 0xF0, (byte) 0x9F, (byte) 0x98, (byte) 0x80}, 0, 8);
        assertEquals("a\uDCE4\uDCB8b\uD83D\uDE00", d.text());
        assertArrayEquals(new int[] {0, 1, 2, 3, 4, 4, 8}, java.util.Arrays.copyOf(d.byteAt(), 7));
    }

    @Test
    void streamHoldsBackAnUnfinishedCharacter() {
        Utf8Stream s = new Utf8Stream();
        assertArrayEquals(new byte[] {'x'}, s.push(new byte[] {'x', (byte) 0xE4}));
        assertArrayEquals(new byte[0], s.push(new byte[] {(byte) 0xB8}));
        assertArrayEquals(new byte[] {(byte) 0xE4, (byte) 0xB8, (byte) 0xAD}, s.push(new byte[] {(byte) 0xAD}));
        assertArrayEquals(new byte[] {(byte) 0xFF, 'y'}, s.push(new byte[] {(byte) 0xFF, 'y'}));
        assertArrayEquals(new byte[0], s.push(new byte[] {(byte) 0xF0}));
        assertArrayEquals(new byte[] {(byte) 0xF0}, s.finish());
    }

    @Test
    void ranksReadStandardBase64() throws Exception {
        String file = Base64.getEncoder().encodeToString("hi".getBytes()) + " 0\r\n\n" + Base64.getEncoder().encodeToString("h".getBytes()) + " 1\n";
        byte[][] r = Ranks.read(new java.io.ByteArrayInputStream(file.getBytes()), "t");
        assertEquals(2, r.length);
        assertArrayEquals("h".getBytes(), r[1]);
    }

    @Test
    void aLoneSurrogateInTheAddedTokensIsRefused(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) throws Exception {
        java.nio.file.Path tiny = k3j.Repo.path("oracle-fixtures/tiny-k3");
        java.nio.file.Files.copy(tiny.resolve(Tokenizer.RANKS_FILE), dir.resolve(Tokenizer.RANKS_FILE));
        String config = java.nio.file.Files.readString(tiny.resolve(Tokenizer.CONFIG_FILE));
        java.nio.file.Files.writeString(dir.resolve(Tokenizer.CONFIG_FILE), config.replace("\"[EOS]\"", "\"[EOS\\ud800]\""));
        TokenizerException e = org.junit.jupiter.api.Assertions.assertThrows(TokenizerException.class, () -> Tokenizer.load(dir));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("id 251: content holds an unpaired surrogate"), e.getMessage());
        java.nio.file.Files.writeString(dir.resolve(Tokenizer.CONFIG_FILE), config.replace("\"[EOS]\"", "\"[EOS\\ud83d\\ude00]\""));
        Tokenizer.load(dir);   // a surrogate pair (an emoji) is text
    }
}
