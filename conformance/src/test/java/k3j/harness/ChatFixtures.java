package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import k3j.chat.Message;
import k3j.chat.Role;
import k3j.chat.Xtml;
import k3j.tokenizer.AddedTokens;
import k3j.tokenizer.SplitPattern;
import k3j.tokenizer.Tokenizer;

/** The chat fixtures (oracle-fixtures/chat, written by make_chat_fixtures.py): renderings, parse cases, sampler vectors. */
public final class ChatFixtures {
    private static JsonNode cases;
    private static Xtml xtml;

    private ChatFixtures() {}

    public static synchronized JsonNode cases() {
        if (cases == null) {
            var file = Project.pinnedFixture("chat", "cases.json");
            cases = Project.json(file);
            for (String k : List.of("xtml", "parse", "sampler")) if (cases.path(k).isEmpty()) fail(file + " has no " + k + " cases: regenerate it");
        }
        return cases;
    }

    /** The tokenizer the fixtures were encoded with: o200k_base, Kimi's pattern, the K3 added tokens at n_base. */
    public static synchronized Xtml xtml() {
        if (xtml == null) {
            byte[][] ranks = TokenizerFixtures.ranks(cases().path("vocabulary").asText());
            var added = AddedTokens.read(Project.fixture("tokenizer/" + cases().path("vocabulary").asText() + ".tokenizer_config.json"), ranks.length);
            xtml = new Xtml(Tokenizer.of(ranks, added, SplitPattern.KIMI));
        }
        return xtml;
    }

    public static List<Message> messages(JsonNode a) {
        List<Message> out = new ArrayList<>();
        for (JsonNode m : a) {
            Role r = Role.of(m.path("role").asText());
            out.add(new Message(r, m.path("content").asText(), m.has("reasoning_content") ? m.path("reasoning_content").asText() : null));
        }
        return out;
    }

    public static int[] ints(JsonNode a) {
        int[] v = new int[a.size()];
        for (int i = 0; i < v.length; i++) v[i] = a.get(i).asInt();
        return v;
    }
}
