package k3j.cli;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The prompt of {@code k3 run} as ids (docs/semantics.md §7.1, §7.3): --ids as they are, --prompt or --prompt-file
 * through the tokenizer, or with --chat the first turn's rendering after the history (for the memory plan).
 *
 * @param tokenizer the tokenizer, or null (ids without --tok)
 * @param history   the conversation (--chat), or null
 * @param ids       the prompt's ids
 */
record RunPrompt(k3j.tokenizer.Tokenizer tokenizer, k3j.chat.Transcript history, int[] ids) {
    /** A --prompt-file larger than this could never fit the position limit: refused unread. */
    static final long MAX_PROMPT_BYTES = 16L << 20;
    private static final java.util.regex.Pattern ASCII_ID = java.util.regex.Pattern.compile("[0-9]{1,10}");

    /** The prompt of {@code run}, with the tokenizer in {@code tokDir} (or none); a chat's control tokens must be ids of the model's {@code vocab}. */
    static RunPrompt of(RunCommand run, Path tokDir, k3j.chat.Thinking thinking, int vocab) {
        k3j.tokenizer.Tokenizer tokenizer = null;
        k3j.chat.Transcript history = null;
        int[] promptIds;
        if (tokDir != null) tokenizer = k3j.tokenizer.Tokenizer.load(tokDir);
        if (run.text.chat) {
            history = run.text.history != null ? readHistory(run) : new k3j.chat.Transcript();
            if (run.text.system != null) {
                if (history.size() > 0) throw run.usage("--system starts a conversation; " + run.text.history + " already holds one (its system message stays)");
                history.add(k3j.chat.Message.system(run.text.system));
            }
            if (history.next() != k3j.chat.Role.USER) throw new k3j.chat.ChatException(run.text.history + ": the history ends with a user message that has no reply");
            k3j.chat.Xtml x = new k3j.chat.Xtml(tokenizer);
            var msgs = new java.util.ArrayList<>(history.messages());
            msgs.add(k3j.chat.Message.user(run.prompt != null ? run.prompt : ""));
            promptIds = run.text.loadState != null ? new int[] {0} : x.encode(x.render(msgs, thinking, true));
        } else {
            promptIds = run.ids != null ? parseIds(run.ids)
                    : tokenizer.encode(run.prompt != null ? run.prompt.getBytes(java.nio.charset.StandardCharsets.UTF_8) : promptBytes(run), true);
        }
        if (run.text.chat) {
            for (String t : new String[] {k3j.chat.Xtml.OPEN, k3j.chat.Xtml.CLOSE, k3j.chat.Xtml.SEP, k3j.chat.Xtml.EOM, k3j.chat.Xtml.EOS}) {
                int id = tokenizer.addedId(t).orElse(Integer.MAX_VALUE);
                if (id >= vocab) throw run.usage("the tokenizer's " + t + " (id " + id + ") is outside the model's vocabulary of " + vocab);
            }
        }
        return new RunPrompt(tokenizer, history, promptIds);
    }

    /** --history: a file refused by type or size is bad input (exit 2), like any other refused file. */
    private static k3j.chat.Transcript readHistory(RunCommand run) {
        try {
            k3j.io.SafeFiles.requireSize(run.text.history, k3j.chat.Transcript.MAX_FILE, "a chat history (--history)");
        } catch (IOException e) {
            // a missing file starts a new conversation
            if (Files.exists(run.text.history, java.nio.file.LinkOption.NOFOLLOW_LINKS)) throw run.usage(k3j.io.SafeFiles.why(e));
        }
        return k3j.chat.Transcript.read(run.text.history);
    }

    private static byte[] promptBytes(RunCommand run) {
        try {
            return k3j.io.SafeFiles.readAll(run.promptFile, MAX_PROMPT_BYTES, "a prompt (--prompt-file)");
        } catch (IOException e) {
            throw run.usage(k3j.io.SafeFiles.why(e));
        }
    }

    /** The ids of {@code s}, separated by ',' or spaces; a part that is not an integer is refused. */
    static int[] parseIds(String s) {
        List<Integer> l = new ArrayList<>();
        for (String part : s.trim().split("[,\\s]+")) {
            if (part.isEmpty()) continue;
            try {
                // ASCII digits only: Integer.parseInt reads "١٢" (Arabic-Indic) as 12
                if (!ASCII_ID.matcher(part).matches()) throw new NumberFormatException(part);
                l.add(Integer.parseInt(part));
            } catch (NumberFormatException e) {
                throw new NumberFormatException("'" + part + "' is not an integer token id");
            }
        }
        return l.stream().mapToInt(Integer::intValue).toArray();
    }
}
