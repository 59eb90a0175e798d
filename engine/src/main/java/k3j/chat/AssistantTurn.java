package k3j.chat;

import java.nio.charset.StandardCharsets;

/**
 * A generated assistant turn split into its thinking and its response (docs/semantics.md §8.4). The ids are
 * what followed the generation prompt. With thinking on, the reasoning runs to the first
 * {@code <|close|>think<|sep|><|open|>response<|sep|>}; the response runs to the first
 * {@code <|close|>response<|sep|><|close|>message<|sep|>}, which must be followed by exactly one id, the end of
 * message or [EOS]. A control token inside either payload, a missing closure or anything after the end is refused.
 */
public record AssistantTurn(String reasoning, String response) {

    public Message message() {
        return Message.assistant(response, reasoning);
    }

    public static AssistantTurn parse(Xtml x, int[] ids, Thinking thinking) {
        Xtml.Ids t = x.ids();
        int split = 0, body = 0;
        if (thinking.on()) {
            int[] switchToResponse = Xtml.concat(new int[] {t.close()}, x.tag("think"), new int[] {t.sep(), t.open()}, x.tag("response"), new int[] {t.sep()});
            split = Xtml.find(ids, 0, switchToResponse);
            if (split < 0) throw new ChatException("the reply never closes its thinking and opens a response");
            body = split + switchToResponse.length;
        }
        int[] closure = Xtml.concat(new int[] {t.close()}, x.tag("response"), new int[] {t.sep(), t.close()}, x.tag("message"), new int[] {t.sep()});
        int end = Xtml.find(ids, body, closure);
        if (end < 0) throw new ChatException("the reply never closes its response and message");
        int last = end + closure.length;
        if (last >= ids.length) throw new ChatException("the reply has no end-of-message token after its closing tags");
        if (ids[last] != t.eom() && ids[last] != t.eos()) throw new ChatException("the reply's closing tags are followed by id " + ids[last] + ", not the end of message");
        if (last + 1 != ids.length) throw new ChatException("the reply goes on for " + (ids.length - last - 1) + " id(s) after its end of message");
        return new AssistantTurn(thinking.on() ? payload(x, ids, 0, split, "reasoning") : null, payload(x, ids, body, end, "response"));
    }

    private static String payload(Xtml x, int[] ids, int from, int to, String what) {
        int[] part = java.util.Arrays.copyOfRange(ids, from, to);
        for (int id : part) if (x.tokenizer().added(id) != null) throw new ChatException("the " + what + " holds the control token " + x.tokenizer().added(id).content());
        return new String(x.tokenizer().decode(part), StandardCharsets.UTF_8);
    }
}
