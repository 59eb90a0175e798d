package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;
import k3j.tokenizer.AddedTokens;
import k3j.tokenizer.Ranks;
import k3j.tokenizer.SplitPattern;
import k3j.tokenizer.Tokenizer;

/**
 * The tokenizer parity fixtures (oracle-fixtures/tokenizer, written by make_fixtures.py from tiktoken): the cases,
 * and tokenizers built from the public rank files inside the jtokkit jar — checked against the manifest's sha256
 * before use — with either the vocabulary's own split pattern or Kimi's plus the K3 added-token layout.
 */
public final class TokenizerFixtures {
    /** One fixture case: these bytes, under this vocabulary and pattern, with added tokens on or off, are these ids. */
    public record Case(String name, String vocab, String pattern, boolean addedTokens, byte[] text, int[] ids) {
        @Override
        public String toString() {
            return name;
        }
    }

    private static final Map<String, Tokenizer> TOKENIZERS = new ConcurrentHashMap<>();
    private static final Map<String, byte[][]> RANKS = new ConcurrentHashMap<>();

    private TokenizerFixtures() {}

    public static JsonNode manifest() {
        return Project.json(Project.fixture("tokenizer/manifest.json"));
    }

    public static List<Case> cases() {
        Path file = Project.pinnedFixture("tokenizer", "cases.json");
        JsonNode cases = Project.json(file).path("cases");
        if (!cases.isArray() || cases.isEmpty()) fail(file + " holds no cases: regenerate with make_fixtures.py");
        List<Case> out = new ArrayList<>();
        for (JsonNode c : cases) {
            int[] ids = new int[c.path("ids").size()];
            for (int i = 0; i < ids.length; i++) ids[i] = c.path("ids").get(i).asInt();
            out.add(new Case(c.path("name").asText(), c.path("vocab").asText(), c.path("pattern").asText(), c.path("added_tokens").asBoolean(),
                    Base64.getDecoder().decode(c.path("bytes_b64").asText()), ids));
        }
        return out;
    }

    /** The vocabularies the fixtures use (o200k_base, cl100k_base). */
    public static Set<String> vocabularies() {
        Set<String> names = new java.util.TreeSet<>();
        manifest().path("vocabularies").fieldNames().forEachRemaining(names::add);
        if (names.isEmpty()) fail("the tokenizer manifest names no vocabulary");
        return names;
    }

    /** {@code pattern} is "own" (the vocabulary's tiktoken pattern) or "kimi". */
    public static Tokenizer tokenizer(String vocab, String pattern) {
        return TOKENIZERS.computeIfAbsent(vocab + "/" + pattern, k -> build(vocab, pattern));
    }

    private static Tokenizer build(String vocab, String pattern) {
        JsonNode v = manifest().path("vocabularies").path(vocab);
        if (v.isMissingNode()) fail("the tokenizer manifest has no vocabulary " + vocab);
        byte[][] ranks = ranks(vocab);
        if (ranks.length != v.path("n_base").asInt()) fail(vocab + ": " + ranks.length + " ranks, the manifest says " + v.path("n_base"));
        var added = AddedTokens.read(Project.fixture("tokenizer/" + v.path("tokenizer_config").asText()), ranks.length);
        String p = switch (pattern) {
            case "own" -> v.path("own_pattern").asText();
            case "kimi" -> {
                if (!manifest().path("kimi_pattern").asText().equals(SplitPattern.KIMI)) {
                    fail("the fixtures were made with another Kimi pattern than SplitPattern.KIMI: regenerate or fix one of them");
                }
                yield SplitPattern.KIMI;
            }
            default -> fail("unknown pattern " + pattern);
        };
        return Tokenizer.of(ranks, added, p);
    }

    /** The rank file shipped in the jtokkit jar, after its sha256 is checked against the manifest. */
    public static byte[][] ranks(String vocab) {
        return RANKS.computeIfAbsent(vocab, k -> {
            JsonNode v = manifest().path("vocabularies").path(vocab);
            String resource = v.path("ranks_resource").asText();
            byte[] raw;
            try (InputStream in = TokenizerFixtures.class.getClassLoader().getResourceAsStream(resource)) {
                if (in == null) return fail("no " + resource + " on the test classpath (the jtokkit test dependency ships it)");
                raw = in.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            if (!KernelFixtures.sha256(raw).equals(v.path("ranks_sha256").asText())) {
                fail(resource + ": sha256 differs from the manifest's (another jtokkit version?): regenerate the fixtures against it");
            }
            try {
                return Ranks.read(new ByteArrayInputStream(raw), resource);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** Every source and documentation file of this repository (not build output, not fixture data), sorted. */
    public static List<Path> repositoryTextFiles() {
        Path root = Project.root();
        Set<String> ext = Set.of("java", "md", "py", "sh", "xml", "yml", "yaml", "txt", "mjs");
        try (Stream<Path> s = Files.walk(root)) {
            List<Path> files = s.filter(Files::isRegularFile)
                    .filter(p -> {
                        String rel = root.relativize(p).toString();
                        if (rel.startsWith(".git") || rel.contains("/target/") || rel.startsWith("target") || rel.contains("node_modules")
                                || rel.startsWith("reports/")) return false;
                        String n = p.getFileName().toString();
                        int dot = n.lastIndexOf('.');
                        return dot > 0 && ext.contains(n.substring(dot + 1)) || n.equals("k3") || n.equals("run") || n.equals("mvn");
                    })
                    .filter(p -> p.toFile().length() < 4 << 20)
                    .sorted().toList();
            if (files.size() < 50) fail("found only " + files.size() + " source and doc files under " + root);
            return files;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static byte[] read(Path p) {
        try {
            return Files.readAllBytes(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
