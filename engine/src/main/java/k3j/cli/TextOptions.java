package k3j.cli;

import java.nio.file.Path;
import k3j.chat.Thinking;
import k3j.sample.Sampler;
import picocli.CommandLine.ArgGroup;
import picocli.CommandLine.Option;

/** The run command's text, chat, sampling and state options (docs/semantics.md §8). */
final class TextOptions {
    @ArgGroup(exclusive = false)
    TokenizerOption tokenizer;

    @Option(names = "--chat", description = "chat: each line of stdin is a user message (interactive with line editing on a terminal); "
            + "the replies are streamed to stdout")
    boolean chat;

    @Option(names = "--system", paramLabel = "TEXT", description = "chat: the system message (only for a new conversation)")
    String system;

    @Option(names = "--history", paramLabel = "FILE.jsonl", description = "chat: the conversation so far; saved after every turn (a missing file starts one)")
    Path history;

    @Option(names = "--think", paramLabel = "on|off", description = "chat: the thinking channel (default on)")
    String think;

    @Option(names = "--effort", paramLabel = "low|high|max", description = "chat: thinking effort (default max)")
    String effort;

    @Option(names = "--temperature", paramLabel = "T", description = "sampling temperature; 0 = greedy (default 0, and 1.0 in chat)")
    Double temperature;

    @Option(names = "--top-p", paramLabel = "P", defaultValue = "1.0", description = "nucleus sampling mass in (0, 1] (default ${DEFAULT-VALUE})")
    double topP;

    @Option(names = "--top-k", paramLabel = "K", defaultValue = "0", description = "sample among the K most likely ids; 0 = all (default ${DEFAULT-VALUE})")
    int topK;

    @Option(names = "--seed", paramLabel = "N", defaultValue = "0", description = "sampler seed; the same seed gives the same ids (default ${DEFAULT-VALUE})")
    long seed;

    @Option(names = "--save-state", paramLabel = "FILE", description = "write the incremental state after the run (chat: after every turn); needs --incremental or --chat")
    Path saveState;

    @Option(names = "--load-state", paramLabel = "FILE", description = "continue from a saved state (refused for other weights); needs --incremental or --chat")
    Path loadState;

    Sampler.Settings sampling() {
        return new Sampler.Settings(temperature != null ? temperature : chat ? 1.0 : 0.0, topP, topK, seed);
    }

    Thinking thinking() {
        String t = think != null ? think : "on";
        if (!t.equals("on") && !t.equals("off")) throw new IllegalArgumentException("--think must be on or off, got '" + t + "'");
        return new Thinking(t.equals("on"), effort != null ? effort : "max");
    }

    /** The first chat-only flag given without --chat (it would change nothing), or null. */
    String chatOnlyWithoutChat() {
        if (chat) return null;
        return system != null ? "--system" : history != null ? "--history" : think != null ? "--think" : effort != null ? "--effort" : null;
    }

    /** The --tok directory, or null. */
    Path tok() {
        return TokenizerOption.of(tokenizer);
    }
}
