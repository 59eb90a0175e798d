package k3j.gates;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.qameta.allure.Allure;
import io.qameta.allure.Epic;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.stream.Stream;
import k3j.harness.ChildJvm;
import k3j.harness.Evidence;
import k3j.harness.Project;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Claim: every door a hostile user probed (docs/files.md, docs/formats.md §10 and §18) refuses by name what it must:
 * an output naming one of the run's own inputs (by file identity: a hard link too), a link, or a shard's plan; a shard
 * folder that is a link; a shard file that is a FIFO (the merge answers, it does not hang); a provider response whose
 * usage, token strings, bytes or order contradict its entries; a request asking with fields that change what was
 * asked; thresholds that leave a 0 % top-1 agreement unjudged (a contradiction, whatever threshold is given); JSON the
 * library refuses (said in words, never its own); a shard count past the range; a response path that names nothing;
 * and an API report over layers its Conform did not judge. Each case is the reproducer of a wrong pass, a data loss or
 * a hang, run on the product as a user runs it ({@code k3}, one child process each); every input a refused output
 * named is checked unchanged, byte for byte.
 */
@Tag("doors")
@Epic("doors")
class HostileDoorsGate {
    static final ObjectMapper JSON = new ObjectMapper();
    static Path tmp;

    /** One reproducer: the k3 line, the exit it must give, what it must say, and the files it must leave as they were. */
    record Case(String name, List<String> args, int exit, List<String> says, List<Path> unchanged) {}

    @BeforeAll
    static void tmp() throws IOException {
        tmp = Files.createTempDirectory("k3-hostile-doors");
    }

    @AfterAll
    static void clean() throws IOException {
        if (tmp != null) try (Stream<Path> s = Files.walk(tmp)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) Files.deleteIfExists(p);
        }
    }

    static Path provider(String file) {
        return Project.dump("provider/" + file);
    }

    /** A copy of the provider's chat response, edited by {@code edit}. */
    static Path response(String name, Consumer<ObjectNode> edit) throws IOException {
        ObjectNode r = (ObjectNode) JSON.readTree(Files.readAllBytes(provider("exact.chat.json")));
        edit.accept(r);
        Path p = tmp.resolve(name + ".json");
        Files.writeString(p, JSON.writeValueAsString(r));
        return p;
    }

    static ObjectNode entry(ObjectNode r, int i) {
        return (ObjectNode) r.path("choices").path(0).path("logprobs").path("content").path(i);
    }

    /** compare-logits CANDIDATE --reference RESPONSE --request REQUEST --model MODEL, then {@code extra}. */
    static List<String> compare(Path candidate, Path response, Path request, Path model, String... extra) {
        List<String> a = new ArrayList<>(List.of("compare-logits", candidate.toString(), "--reference", response.toString(), "--request", request.toString(),
                "--model", model.toString()));
        a.addAll(List.of(extra));
        return a;
    }

    static Path copy(Path from, Path to) throws IOException {
        if (Files.isDirectory(from)) {
            try (Stream<Path> s = Files.walk(from)) {
                for (Path p : s.toList()) {
                    Path t = to.resolve(from.relativize(p).toString());
                    if (Files.isDirectory(p)) Files.createDirectories(t);
                    else Files.copy(p, t);
                }
            }
            return to;
        }
        Files.createDirectories(to.getParent());
        return Files.copy(from, to);
    }

    @Test
    @DisplayName("every probed door refuses its reproducer by name, and no input is touched")
    void everyReproducerIsRefused() throws Exception {
        Path model = copy(Project.fixture("tiny-k3"), tmp.resolve("model"));
        Path dump = copy(Project.dump("tiny-k3"), tmp.resolve("dump"));
        Path resp = copy(provider("exact.chat.json"), tmp.resolve("in/response.json"));
        Path req = copy(provider("request.completions.json"), tmp.resolve("in/request.json"));
        Path cand = copy(provider("reference.logits.npy"), tmp.resolve("in/candidate.npy"));
        Path hardLink = Files.createLink(tmp.resolve("in/another-name.json"), resp);
        Path elsewhere = Files.createDirectories(tmp.resolve("elsewhere"));
        Path link = Files.createSymbolicLink(tmp.resolve("in/out-link.json"), elsewhere.resolve("new.json"));
        Path root = Files.createDirectories(tmp.resolve("results/shard-1-of-4"));
        Path plan = Files.writeString(root.resolve("plan.json"), "{\"format\": \"k3-conform-shard\"}\n");
        Path digests = tmp.resolve("in/digests.json");
        new k3j.fleet.TensorDigests(new java.util.TreeMap<>()).write(digests, "the test's manifest");
        Path linked = Files.createDirectories(tmp.resolve("linked"));
        Files.createSymbolicLink(linked.resolve("shard-0-of-2"), elsewhere);
        ArrayNode deep = JSON.createArrayNode();
        String nested = "[".repeat(1001) + "]".repeat(1001);

        String identity = "an input of this command";
        List<Case> cases = List.of(
                new Case("--json over the provider response", compare(cand, resp, req, model, "--json", resp.toString()), 2, List.of(identity), List.of(resp)),
                new Case("--json over the request", compare(cand, resp, req, model, "--json", req.toString()), 2, List.of(identity), List.of(req)),
                new Case("--json over the candidate", compare(cand, resp, req, model, "--json", cand.toString()), 2, List.of(identity), List.of(cand)),
                new Case("--json over a hard link to the response", compare(cand, resp, req, model, "--json", hardLink.toString()), 2, List.of(identity), List.of(resp)),
                new Case("--json over the model's tiktoken.model", compare(cand, resp, req, model, "--json", model.resolve("tiktoken.model").toString()), 2,
                        List.of(identity), List.of(model.resolve("tiktoken.model"))),
                new Case("--json over a plain reference .npy", List.of("compare-logits", cand.toString(), "--reference", resp.resolveSibling("candidate.npy").toString(),
                        "--config", model.resolve("config.json").toString(), "--json", cand.toString()), 2, List.of(identity), List.of(cand)),
                new Case("--json over a reference dump's logits.bin", List.of("compare-logits", cand.toString(), "--reference", dump.toString(), "--json",
                        dump.resolve("logits.bin").toString()), 2, List.of(identity), List.of(dump.resolve("logits.bin"))),
                new Case("--json through a symbolic link", compare(cand, resp, req, model, "--json", link.toString()), 2, List.of("symbolic link"), List.of()),
                new Case("conform --merge --json over a shard's plan", List.of("conform", "--merge", tmp.resolve("results").toString(), "--digests", digests.toString(), "--json", plan.toString()), 2,
                        List.of(identity), List.of(plan)),
                new Case("--digests without --merge", List.of("conform", model.toString(), "--reference", dump.toString(), "--threads", "1", "--digests", digests.toString()), 2,
                        List.of("give it with --merge ROOT"), List.of()),
                new Case("a shard folder that is a symbolic link", List.of("conform", model.toString(), "--reference", dump.toString(), "--threads", "1", "--shard", "0/2",
                        "--results", linked.toString()), 2, List.of("symbolic link"), List.of()),
                new Case("usage.prompt_tokens -1", compare(cand, response("negative-prompt", r -> ((ObjectNode) r.path("usage")).put("prompt_tokens", -1)), req, model), 2,
                        List.of("usage.prompt_tokens = -1 is below 0"), List.of()),
                new Case("completion_tokens 7 beside 20 entries", compare(cand, response("seven", r -> ((ObjectNode) r.path("usage")).put("completion_tokens", 7)), req, model), 2,
                        List.of("usage.completion_tokens is 7, beside 20 logprob entries"), List.of()),
                new Case("an alternative whose token and bytes disagree", compare(cand, response("alt-bytes",
                        r -> ((ObjectNode) entry(r, 4).path("top_logprobs").path(1)).put("token", "Q")), req, model), 2, List.of("disagree"), List.of()),
                new Case("a chosen \"Z\" whose bytes are [63]", compare(cand, response("chosen-z", r -> {
                    entry(r, 1).put("token", "Z");
                    ((ObjectNode) entry(r, 1).path("top_logprobs").path(0)).put("token", "Z");
                }), req, model), 2, List.of("token \"Z\" and its bytes 3f (\"?\") disagree"), List.of()),
                new Case("top_logprobs out of order", compare(cand, response("order", r -> {
                    ArrayNode top = (ArrayNode) entry(r, 5).path("top_logprobs");
                    JsonNode first = top.get(0);
                    top.set(0, top.get(2));
                    top.set(2, first);
                }), req, model), 2, List.of("out of order"), List.of()),
                new Case("all-zero logits with --max-kl 0.5 alone", compare(zeros(), resp, req, model, "--max-kl", "0.5"), 1,
                        List.of("contradiction: within mean top-k KL <= 0.5000, yet same top-1 0.0%"), List.of()),
                new Case("a request with tools", compare(cand, resp, request("tools", "tools", JSON.createArrayNode().add(JSON.createObjectNode().put("type", "function"))), model), 2,
                        List.of("asks with \"tools\""), List.of()),
                new Case("a request with a suffix", compare(cand, resp, request("suffix", "suffix", JSON.getNodeFactory().textNode(" end")), model), 2,
                        List.of("asks with \"suffix\""), List.of()),
                new Case("trailing data after the response", compare(cand, text("trailing", Files.readString(resp) + "\n{}"), req, model), 2,
                        List.of("a second JSON value after the first"), List.of()),
                new Case("NaN in the request", compare(cand, resp, text("nan-request", "{\"prompt\": [1, 2], \"temperature\": NaN}"), model), 2,
                        List.of("NaN or Infinity, which JSON does not allow"), List.of()),
                new Case("a response nested 1001 deep", compare(cand, text("deep", "{\"choices\": " + nested + "}"), req, model), 2,
                        List.of("nested deeper than 1000 levels"), List.of()),
                new Case("--shard 1/2147483648", List.of("conform", model.toString(), "--reference", dump.toString(), "--shard", "1/2147483648", "--results",
                        tmp.resolve("r").toString()), 2, List.of("count 2147483648 is out of range"), List.of()),
                new Case("a mistyped response path", compare(cand, tmp.resolve("in/respnse.json"), req, model), 2, List.of("respnse.json: no such file"), List.of()));
        Map<Path, byte[]> before = new java.util.HashMap<>();
        for (Case c : cases) for (Path p : c.unchanged()) before.put(p, Files.readAllBytes(p));
        List<ChildJvm.Result> results = ChildJvm.k3All(cases.stream().map(Case::args).toList());
        List<String> wrong = new ArrayList<>();
        for (int i = 0; i < cases.size(); i++) {
            Case c = cases.get(i);
            ChildJvm.Result r = results.get(i);
            Evidence.text(c.name(), "k3 " + String.join(" ", c.args()) + "\n" + r.output());
            List<String> bad = new ArrayList<>();
            if (r.exit() != c.exit()) bad.add("exit " + r.exit() + ", want " + c.exit());
            for (String s : c.says()) if (!r.output().contains(s)) bad.add("does not say '" + s + "'");
            for (String leak : List.of("com.fasterxml", "Jackson", "JsonReadFeature", "StreamReadConstraints", "`", "Exception")) {
                if (r.output().contains(leak)) bad.add("names the library's internals ('" + leak + "')");
            }
            if (r.output().contains("VERDICT: WITHIN") || r.output().contains("CONFORMS")) bad.add("passes");
            for (Path p : c.unchanged()) if (!java.util.Arrays.equals(before.get(p), Files.readAllBytes(p))) bad.add(p + " was changed");
            if (!bad.isEmpty()) wrong.add(c.name() + ": " + String.join("; ", bad) + "\n" + r.output());
        }
        try (Stream<Path> s = Files.list(elsewhere)) {
            assertEquals(List.of(), s.toList(), "nothing is written where a link points");
        }
        Allure.parameter("cases", cases.size());
        assertEquals(List.of(), wrong, "reproducers not refused as they must be");
    }

    static Path zeros() throws IOException {
        Path ref = provider("reference.logits.npy");
        byte[] b = Files.readAllBytes(ref);
        int header = 10 + ((b[8] & 0xff) | (b[9] & 0xff) << 8);
        java.util.Arrays.fill(b, header, b.length, (byte) 0);
        return Files.write(tmp.resolve("zeros.npy"), b);
    }

    static Path request(String name, String field, JsonNode value) throws IOException {
        ObjectNode r = (ObjectNode) JSON.readTree(Files.readAllBytes(provider("request.completions.json")));
        r.set(field, value);
        return Files.writeString(tmp.resolve("request-" + name + ".json"), JSON.writeValueAsString(r));
    }

    static Path text(String name, String body) throws IOException {
        return Files.writeString(tmp.resolve(name + ".json"), body);
    }

    @Test
    @DisplayName("a shard file that is a FIFO is refused unread: the merge answers INCOMPLETE, it does not hang")
    void aFifoShardFileDoesNotHangTheMerge() throws Exception {
        for (String file : List.of("plan.json", "results.json")) {
            Path root = Files.createDirectories(tmp.resolve("fifo-" + file));
            k3j.fleet.ShardId id = new k3j.fleet.ShardId(0, 1);
            k3j.fleet.WorkPlan.Part part = new k3j.fleet.WorkPlan.Part(0, List.of(0), false, 0, 0);
            k3j.fleet.Identity who = new k3j.fleet.Identity("m".repeat(64), "r".repeat(64), "b".repeat(64), 1, "logits=false experts=false", part.text());
            Path dir = k3j.fleet.ShardFolder.start(root, id, who, part, tmp);
            k3j.fleet.ShardFolder.finish(dir, id, who, part, new k3j.fleet.Judged(List.of(), null, List.of(), List.of(), null), new k3j.fleet.TensorDigests(new java.util.TreeMap<>()));
            Files.delete(dir.resolve(file));
            assertEquals(0, new ProcessBuilder("mkfifo", dir.resolve(file).toString()).start().waitFor(), "mkfifo");
            Path manifest = tmp.resolve("fifo-" + file + ".digests.json");
            new k3j.fleet.TensorDigests(new java.util.TreeMap<>()).write(manifest, "the test's manifest");
            ChildJvm.Result r = ChildJvm.run(Map.of(), 120, "k3j.cli.K3", "conform", "--merge", root.toString(), "--digests", manifest.toString());
            Evidence.text("merge with " + file + " a FIFO", r.output());
            assertEquals(3, r.exit(), r.output());
            assertTrue(r.output().contains("a FIFO, not a regular file"), r.output());
        }
    }

    @Test
    @DisplayName("the API's report takes only its own Conform's layer reports, each once")
    void aReportCoversOnlyWhatItsConformJudged() throws Exception {
        k3j.api.Conform.Options o = k3j.api.Conform.Options.DEFAULTS.withThreads(1).withReference(Project.dump("tiny-k3"), List.of()).withLogits(false);
        try (k3j.api.Conform a = k3j.api.Conform.model(Project.fixture("tiny-k3"), k3j.api.Plan.resident(), o);
             k3j.api.Conform b = k3j.api.Conform.model(Project.fixture("tiny-k3"), k3j.api.Plan.resident(), o)) {
            List<k3j.api.ConformReport.Layer> mine = a.layers(List.of(0), x -> {});
            List<k3j.api.ConformReport.Layer> theirs = b.layers(List.of(0, 1), x -> {});
            assertEquals(1, a.report(mine, 0).layers().size(), "its own layer is reported");
            IllegalArgumentException other = assertThrows(IllegalArgumentException.class, () -> a.report(theirs, 0));
            assertTrue(other.getMessage().contains("was not made by this Conform"), other.getMessage());
            List<k3j.api.ConformReport.Layer> copies = new ArrayList<>();
            for (int i = 0; i < a.layerCount(); i++) copies.add(mine.getFirst());
            IllegalArgumentException twice = assertThrows(IllegalArgumentException.class, () -> a.report(copies, 0));
            assertTrue(twice.getMessage().contains("given twice"), twice.getMessage());
        }
    }
}
