package k3j.cli;

import java.io.PrintWriter;
import java.io.StringWriter;
import k3j.model.Assembly;

/** One k3 command line run in-process exactly as {@code k3} runs it: its exit code and what it printed to each stream. */
public record CliRun(int exit, String out, String err) {
    public static CliRun k3(String... args) {
        return k3(Assembly.Intercepts.NONE, args);
    }

    /** With {@code intercepts} interposed on the run's expert and trunk reads. */
    public static CliRun k3(Assembly.Intercepts intercepts, String... args) {
        StringWriter out = new StringWriter(), err = new StringWriter();
        int exit = K3.execute(new PrintWriter(out, true), new PrintWriter(err, true), intercepts, args);
        return new CliRun(exit, out.toString(), err.toString());
    }
}
