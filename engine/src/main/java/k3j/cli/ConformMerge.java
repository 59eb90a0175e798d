package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import k3j.io.AtomicWrite;

/** {@code k3 conform --merge ROOT}: the shard folders under ROOT as one run's verdict (docs/formats.md §18), or INCOMPLETE. */
final class ConformMerge {
    private ConformMerge() {}

    /** Prints the merged run and its verdict, writes {@code json} when given; exits by the verdict (INCOMPLETE: 3). */
    static int run(Path root, Path json, PrintWriter out, PrintWriter err) throws IOException {
        k3j.fleet.Merge m;
        try {
            m = k3j.fleet.Merge.of(root);
        } catch (IOException e) {
            err.println("k3: " + e.getMessage());
            return ExitCode.USAGE;
        }
        out.print(m.text());
        if (json != null) AtomicWrite.string(json, "--json", k3j.fleet.ShardFolder.pretty(m.json()));
        out.flush();
        return m.verdict().exitCode();
    }
}
