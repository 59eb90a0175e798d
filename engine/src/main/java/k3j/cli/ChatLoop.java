package k3j.cli;

import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import k3j.chat.ChatException;
import k3j.chat.Conversation;
import k3j.chat.Display;
import k3j.chat.History;
import k3j.chat.Xtml;
import k3j.model.DecodeState;
import k3j.model.Forward;
import k3j.state.Binding;
import k3j.state.StateException;
import k3j.state.StateFile;
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
    private final Conversation conv;
    private final Xtml xtml;
    private final TextOptions opt;
    private final Binding binding;
    private final int maxNew;
    private final PrintStream out;
    private final PrintWriter err;
    private final AtomicBoolean stop = new AtomicBoolean();

    private final int limit;
    private final String limitSource;

    /** {@code limit}: the positions the conversation may hold ({@code limitSource} names where the limit comes from). */
    ChatLoop(Conversation conv, Xtml xtml, TextOptions opt, Binding binding, int maxNew, int limit, String limitSource, PrintStream out, PrintWriter err) {
        this.limit = limit;
        this.limitSource = limitSource;
        conv.limitPositions(limit, limitSource);
        this.conv = conv;
        this.xtml = xtml;
        this.opt = opt;
        this.binding = binding;
        this.maxNew = maxNew;
        this.out = out;
        this.err = err;
    }

    /** Continues from {@code --load-state}, which must follow exactly the loaded history. */
    void resume(Forward f) {
        int n = StateFile.idCount(opt.loadState, limit - maxNew - 64, "a chat may still hold with --gen " + maxNew + " (" + limitSource + ")");
        DecodeState st = f.newState(n + maxNew + 64);
        StateFile.Loaded l = StateFile.load(opt.loadState, binding, st);
        History h = conv.history();
        if (!Arrays.equals(l.conversation(), h.sha256())) {
            throw new StateException(opt.loadState + ": refusing the state: it follows another conversation than "
                    + (opt.history != null ? opt.history : "this one") + " (history sha256 " + HexFormat.of().formatHex(l.conversation()).substring(0, 16)
                    + "…, this history's " + h.sha256Hex().substring(0, 16) + "…)");
        }
        conv.resume(st, l.ids());
        err.printf("k3: resumed %d positions from %s%n", st.cached(), opt.loadState);
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
                line = k3j.io.SafeFiles.readLine(in, History.MAX_LINE, "--chat (stdin)");
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
                            conv.history().save(opt.history);
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
            r = conv.turn(user, maxNew, id -> {
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
        if (opt.history != null) conv.history().save(opt.history);
        if (opt.saveState != null) StateFile.save(opt.saveState, binding, conv.history().sha256(), conv.ids(), conv.state());
        err.flush();
        return ExitCode.OK;
    }
}
