package k3j.cli;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import k3j.io.AtomicWrite;

/** {@code k3 conform --merge ROOT}: the shard folders under ROOT as one run's verdict (docs/formats.md §18), or INCOMPLETE. */
final class ConformMerge {
    private ConformMerge() {}

    /** What {@code --merge} without {@code --digests} says: the manifest is what the shards' bytes are judged against. */
    static final String NEEDS_DIGESTS = "--merge ROOT needs --digests FILE: the model's per-tensor digest manifest, made once from the model "
            + "(k3 digest MODEL --out FILE; docs/formats.md §18.5); every shard's tensors are judged against it, never against a sample";

    /** Prints the merged run and its verdict (what must be judged from the reference {@code reference} finds; every shard's tensors checked against the digest manifest {@code digests}), writes {@code json} when given; exits by the verdict (INCOMPLETE: 3). */
    static int run(Path root, java.util.function.Function<String, k3j.dump.ReferenceDump> reference, Path digests, Path json, PrintWriter out, PrintWriter err) throws IOException {
        k3j.fleet.Merge m;
        try {
            m = k3j.fleet.Merge.of(root, reference, k3j.fleet.TensorDigests.read(digests));
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
