package k3j.cli;

import java.io.PrintWriter;
import java.io.StringWriter;
import picocli.CommandLine;

/** One k3 command run in-process, as the CLI tests see it: its exit code and what it printed to each stream. */
public record CliRun(int exit, String out, String err) {
    public static CliRun k3(String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        CommandLine cl = K3.commandLine();
        cl.setOut(new PrintWriter(out, true));
        cl.setErr(new PrintWriter(err, true));
        int exit = cl.execute(args);
        return new CliRun(exit, out.toString(), err.toString());
    }
}
