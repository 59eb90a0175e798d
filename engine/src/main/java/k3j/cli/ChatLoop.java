package k3j.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import k3j.api.Chat;
import k3j.chat.ChatException;
import k3j.chat.Conversation;
import k3j.chat.Display;
import k3j.chat.Xtml;
import org.jline.reader.EndOfFileException;
import org.jline.reader.LineReader;
import org.jline.reader.LineReaderBuilder;
import org.jline.reader.UserInterruptException;
import org.jline.terminal.Terminal;
import org.jline.terminal.TerminalBuilder;

/**
 * {@code k3 MODEL --chat}: user turns from stdin — one line each from a pipe, or typed on a terminal with line
 * editing and input history ({@code /reset} keeps only the system message, {@code /save} writes the history,
 * Ctrl-C stops the reply being generated and keeps the conversation, Ctrl-D ends) — replies streamed to
 * stdout. After every turn the history ({@code --history}) and the state ({@code --save-state}) are saved.
 */
final class ChatLoop {
    private final Chat conv;
    private final Xtml xtml;
    private final TextOptions opt;
    private final int maxNew;
    private final PrintStream out;
    private final PrintWriter err;
    private final AtomicBoolean stop = new AtomicBoolean();

    ChatLoop(Chat conv, TextOptions opt, int maxNew, PrintStream out, PrintWriter err) {
        this.conv = conv;
        this.xtml = conv.xtml();
        this.opt = opt;
        this.maxNew = maxNew;
        this.out = out;
        this.err = err;
    }

    /** Continues from {@code --load-state}, which must follow exactly the loaded history. */
    void resume() {
        int positions = conv.resume(opt.loadState, opt.history != null ? opt.history.toString() : "this one", maxNew + 64);
        err.printf("k3: resumed %d positions from %s%n", positions, opt.loadState);
        err.flush();
    }

    /** One prompt (--prompt with --chat), or every line of stdin. Returns the exit code. */
    int run(String prompt) throws IOException {
        if (prompt != null) return turn(prompt);
        if (System.console() != null && System.console().isTerminal()) return interactive();
        java.io.InputStream in = new java.io.BufferedInputStream(System.in);
        while (true) {
            String line;
            try {
                line = k3j.io.SafeFiles.readLine(in, k3j.chat.History.MAX_LINE, "--chat (stdin)");
            } catch (IOException e) {
                err.println("k3: " + e.getMessage());
                err.flush();
                return ExitCode.USAGE;
            }
            if (line == null) return ExitCode.OK;
            if (line.isBlank()) continue;
            int rc = turn(line);
            if (rc != ExitCode.OK) return rc;
        }
    }

    private int interactive() throws IOException {
        try (Terminal t = TerminalBuilder.builder().system(true).build()) {
            LineReader reader = LineReaderBuilder.builder().terminal(t).appName("k3").build();
            t.handle(Terminal.Signal.INT, s -> stop.set(true));
            t.writer().println("k3 chat: /reset starts over, /save writes the history, Ctrl-C stops a reply, Ctrl-D quits.");
            while (true) {
                String line;
                try {
                    line = reader.readLine("> ");
                } catch (UserInterruptException e) {
                    continue;
                } catch (EndOfFileException e) {
                    return ExitCode.OK;
                }
                if (line.isBlank()) continue;
                switch (line.strip()) {
                    case "/reset" -> {
                        conv.reset();
                        t.writer().println("(conversation reset)");
                    }
                    case "/save" -> {
                        if (opt.history == null) t.writer().println("(no --history file to save to)");
                        else {
                            conv.saveHistory(opt.history);
                            t.writer().println("(saved " + opt.history + ")");
                        }
                    }
                    default -> turn(line);
                }
                t.flush();
            }
        }
    }

    /** Generates one reply, streaming it; the exit code of a turn that could not run (2: refused by the position limit). */
    private int turn(String user) {
        stop.set(false);
        Display display = new Display(xtml);
        Conversation.Reply r;
        try {
            r = conv.reply(user, maxNew, id -> {
                out.writeBytes(display.token(id));
                out.flush();
            }, stop::get);
        } catch (ChatException e) {
            err.println("k3: " + e.getMessage());
            err.flush();
            return e instanceof Conversation.TooLong ? ExitCode.USAGE : ExitCode.RUNTIME;
        }
        out.writeBytes(display.finish());
        out.println();
        out.flush();
        if (r.problem() != null) err.println("k3: note: the reply is not a well-formed assistant turn (" + r.problem() + "); the history keeps its text");
        err.printf(Locale.ROOT, "k3: turn %d: fed %d ids in %.3f s, generated %d in %.3f s%s%n", conv.history().size() / 2, r.fed().length, r.prefillSeconds(),
                r.generated().length, r.decodeSeconds(), conv.state() != null ? " (" + conv.state().cached() + " positions held)" : "");
        if (opt.history != null) conv.saveHistory(opt.history);
        if (opt.saveState != null) conv.saveState(opt.saveState);
        err.flush();
        return ExitCode.OK;
    }
}
