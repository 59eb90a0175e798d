package k3j.tokenizer;

import k3j.Repo;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Base64;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Tokenizer throughput on a large mixed-script text: the engine's Java sources and the repository's docs
 * (code, English) interleaved with every well-formed multilingual text of the tokenizer fixtures (Han, Japanese,
 * Korean, Cyrillic, Arabic, Devanagari, Thai, emoji), about 1.5 MB, on o200k_base (from the jtokkit jar) with
 * Kimi's split pattern. One call encodes (or decodes) the whole text: MB/s = size / time.
 *   ci/bench-tokenizer   (prints MB/s)
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"-Xmx1g"})
public class TokenizerBench {
    @Param({"kimi"})
    public String pattern;

    Tokenizer tok;
    byte[] text;
    int[] ids;

    @Setup
    public void load() throws IOException {
        byte[][] ranks;
        try (InputStream in = TokenizerBench.class.getClassLoader().getResourceAsStream("com/knuddels/jtokkit/o200k_base.tiktoken")) {
            ranks = Ranks.read(in, "o200k_base");
        }
        AddedToken[] added = new AddedToken[AddedTokens.RESERVED];
        for (int i = 0; i < added.length; i++) added[i] = new AddedToken(ranks.length + i, "<|reserved_token_" + (ranks.length + i) + "|>", true);
        tok = Tokenizer.of(ranks, added, pattern.equals("kimi") ? SplitPattern.KIMI : "\\s+|\\S+");
        text = mixedText(Repo.path("oracle-fixtures").getParent());
        ids = tok.encode(text, false);
        System.out.printf("%ntext: %d bytes -> %d ids%n", text.length, ids.length);
    }

    /** Sources and docs, with a multilingual text after every file. */
    static byte[] mixedText(Path root) throws IOException {
        ByteArrayOutputStream multi = new ByteArrayOutputStream();
        JsonNode cases = new ObjectMapper().readTree(root.resolve("oracle-fixtures/tokenizer/cases.json").toFile()).path("cases");
        for (JsonNode c : cases) {
            if (c.path("name").asText().startsWith("o200k_base/own/text/") && !c.path("name").asText().contains("invalid")) {
                multi.writeBytes(Base64.getDecoder().decode(c.path("bytes_b64").asText()));
                multi.write('\n');
            }
        }
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        for (String dir : new String[] {"engine/src/main/java", "conformance/src", "docs"}) {
            if (!Files.isDirectory(root.resolve(dir))) continue;
            try (Stream<Path> s = Files.walk(root.resolve(dir))) {
                for (Path p : s.filter(Files::isRegularFile).sorted().toList()) {
                    out.writeBytes(Files.readAllBytes(p));
                    out.writeBytes(multi.toByteArray());
                }
            }
        }
        return out.toByteArray();
    }

    @Benchmark
    public int[] encode() {
        return tok.encode(text, false);
    }

    @Benchmark
    public byte[] decode() {
        return tok.decode(ids);
    }
}
