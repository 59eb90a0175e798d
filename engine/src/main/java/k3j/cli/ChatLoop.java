package k3j.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import k3j.api.Chat;
import k3j.api.internal.ApiInternals;
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
 * editing and input history, Ctrl-C stopping the reply being generated and keeping the conversation, Ctrl-D
 * ending — replies streamed to stdout. A line that starts with '/' is a command ({@link #COMMANDS}), never a
 * message: an unknown one is refused with the list; "//" sends a message that starts with '/'. After every turn
 * the history ({@code --history}) and the state ({@code --save-state}) are saved; after {@code /reset} the new
 * conversation is saved under new names, so the files of the one before keep it.
 */
final class ChatLoop {
    static final String COMMANDS = "/help, /reset, /save, /quit";
    private static final String HELP = "commands: /reset starts a new conversation (the files keep the old one; the new one is saved under new names), "
            + "/save writes the history now, /quit ends (as Ctrl-D does), /help lists them; //text sends a message that starts with '/'";

    private final Chat conv;
    private final Xtml xtml;
    private final int maxNew;
    private final Path loadState;
    private Path history, saveState;   // where this conversation is saved: moved to new names by /reset
    private final PrintStream out;
    private final PrintWriter err;
    private final AtomicBoolean stop = new AtomicBoolean();
    /** The terminal's own Ctrl-C handling (interactive), else SIGINT and SIGTERM stop a turn as they stop {@code run --out}. */
    private boolean terminal;

    ChatLoop(Chat conv, TextOptions opt, int maxNew, PrintStream out, PrintWriter err) {
        this.conv = conv;
        this.xtml = ApiInternals.get().xtml(conv);
        this.maxNew = maxNew;
        this.loadState = opt.loadState;
        this.history = opt.history;
        this.saveState = opt.saveState;
        this.out = out;
        this.err = err;
    }

    /** Continues from {@code --load-state}, which must follow exactly the loaded history. */
    void resume() {
        int positions = conv.resume(loadState, history != null ? history.toString() : "this one", maxNew + 64);
        err.printf("k3: resumed %d positions from %s%n", positions, loadState);
        err.flush();
    }

    /**
     * Says, before the first turn, each reply of the loaded history that a stop cut ({@code "interrupted": true}): it
     * stays as cut, marked, and the conversation goes on after it; it is never continued as if it had ended.
     */
    private void noteInterrupted() {
        var messages = conv.history().messages();
        for (int i = 0; i < messages.size(); i++) {
            if (!messages.get(i).interrupted()) continue;
            err.println("k3: note: " + (history != null ? history : "the history") + ":" + (i + 1) + ": this reply was interrupted (cut by a stop before it ended); "
                    + "it is kept as cut, marked \"interrupted\", and the next message follows it");
        }
        err.flush();
    }

    /** One prompt (--prompt with --chat), or every line of stdin. Returns the exit code. */
    int run(String prompt, InputStream stdin) throws IOException {
        noteInterrupted();
        if (prompt != null) return turn(prompt);
        if (System.console() != null && System.console().isTerminal()) return interactive();
        InputStream in = new java.io.BufferedInputStream(stdin);
        while (true) {
            String line;
            try {
                line = k3j.io.SafeFiles.readLine(in, k3j.chat.Transcript.MAX_LINE, "--chat (stdin)");   // bounded: a line is never held past the cap
            } catch (IOException e) {
                err.println("k3: " + e.getMessage());
                err.flush();
                return ExitCode.USAGE;
            }
            if (line == null) break;
            if (line.isBlank()) continue;
            Line l = Line.of(line);
            if (l.command() == null) {
                int rc = turn(l.message());
                if (rc != ExitCode.OK) return rc;
                continue;
            }
            if (l.command().equals("/quit")) break;
            command(l.command(), s -> err.println("k3: " + s));   // a refused command is said on stderr; the conversation goes on, and so does the exit code
            err.flush();
        }
        return ExitCode.OK;
    }

    /** A line read: a command (the word after '/'), or a message ("//x" is the message "/x"). */
    record Line(String command, String message) {
        static Line of(String line) {
            String t = line.strip();
            if (t.startsWith("//")) return new Line(null, line.substring(line.indexOf('/') + 1));
            if (t.startsWith("/")) return new Line(t.split("\\s+", 2)[0], null);
            return new Line(null, line);
        }
    }

    /** Runs a command, telling {@code say} what it did; one that is not a command is refused, naming the commands. */
    private void command(String c, java.util.function.Consumer<String> say) {
        switch (c) {
            case "/help" -> say.accept(HELP);
            case "/reset" -> {
                conv.reset();
                String kept = "";
                if (history != null && Files.exists(history)) {
                    Path next = nextFree(history);
                    kept = "; " + history + " keeps the conversation before, this one is saved to " + next;
                    history = next;
                }
                if (saveState != null && Files.exists(saveState)) {
                    Path next = nextFree(saveState);
                    kept += "; its state stays in " + saveState + ", this one's goes to " + next;
                    saveState = next;
                }
                say.accept("(conversation reset" + kept + ")");
            }
            case "/save" -> {
                if (history == null) say.accept("(no --history file to save to)");
                else {
                    conv.saveHistory(history);
                    say.accept("(saved " + history + ")");
                }
            }
            case "/quit" -> { }
            default -> {
                say.accept("unknown command " + c + " (not sent to the model); the commands are " + COMMANDS + "; //text sends a message that starts with '/'");
            }
        }
    }

    /** {@code f} with "-2", "-3", ... before its extension: the first name no file has. */
    static Path nextFree(Path f) {
        String name = f.getFileName().toString();
        int dot = name.lastIndexOf('.');
        String stem = dot > 0 ? name.substring(0, dot) : name, ext = dot > 0 ? name.substring(dot) : "";
        for (int i = 2; ; i++) {
            Path p = f.resolveSibling(stem + "-" + i + ext);
            if (!Files.exists(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) return p;   // a dangling link is a name taken
        }
    }

    private int interactive() throws IOException {
        terminal = true;
        try (Terminal t = TerminalBuilder.builder().system(true).build()) {
            LineReader reader = LineReaderBuilder.builder().terminal(t).appName("k3").build();
            t.handle(Terminal.Signal.INT, s -> stop.set(true));
            t.writer().println("k3 chat: " + COMMANDS + " (/help says what they do); Ctrl-C stops a reply, Ctrl-D quits.");
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
                Line l = Line.of(line);
                if (l.command() == null) turn(l.message());
                else if (l.command().equals("/quit")) return ExitCode.OK;
                else command(l.command(), s -> t.writer().println(s));
                t.flush();
            }
        }
    }

    /** Generates one reply, streaming it; false when the turn could not run. */
    /** One reply, streamed; the exit code of a turn that could not run (2: refused by the position limit, the conversation kept). */
    private int turn(String user) {
        String bad = k3j.chat.Transcript.badText(user);
        if (bad != null) {
            // refused at input: a history file holding it would be refused when read back (--history)
            err.println("k3: the message " + bad + ": refused, not sent (a history file cannot hold it); type it without that character");
            err.flush();
            return ExitCode.USAGE;
        }
        stop.set(false);
        Display display = new Display(xtml);
        k3j.api.Reply r;
        String signal = null;
        int signalExit = ExitCode.OK;
        // a signal while the reply streams stops it after the token being made: the turn is kept and saved, then the exit says which signal
        try (StopSignals signals = terminal ? null : new StopSignals(line -> {
            err.println(line);
            err.flush();
        })) {
            r = conv.reply(user, maxNew, id -> {
                out.writeBytes(display.token(id));
                out.flush();
            }, () -> stop.get() || (signals != null && signals.requested()));
            if (signals != null && signals.requested()) {
                signal = signals.name();
                signalExit = signals.exitCode();
            }
        } catch (k3j.api.ChatRefused e) {
            err.println("k3: " + e.getMessage());
            err.flush();
            return e.tooLong() ? ExitCode.USAGE : ExitCode.RUNTIME;
        }
        out.writeBytes(display.finish());
        out.println();
        out.flush();
        if (r.problem() != null) err.println("k3: note: the reply is not a well-formed assistant turn (" + r.problem() + "); the history keeps its text");
        err.printf(Locale.ROOT, "k3: turn %d: prompt %d tokens (fed to the model) in %.3f s, reply %d tokens in %.3f s%s%n", conv.history().size() / 2, r.fed().length,
                r.prefillSeconds(), r.generated().length, r.decodeSeconds(), conv.positions() > 0 ? " (" + conv.positions() + " positions held)" : "");
        if (history != null) conv.saveHistory(history);
        if (saveState != null) conv.saveState(saveState);
        if (signal != null) {
            err.println("k3: interrupted by " + signal + ": the reply was cut after " + r.generated().length + " tokens; the turn is kept"
                    + (history != null ? " in " + history : "") + ", its reply marked \"interrupted\"");
        }
        err.flush();
        return signal != null ? signalExit : ExitCode.OK;
    }
}
