package k3j.cli;

import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import k3j.verdict.ConformException;
import k3j.verdict.Finding;

/**
 * The reference a merge takes its coverage from: the one named (--reference), which must be the one the shards were
 * judged against (by its manifest sha256), or the dump of that sha256 found in the search folders.
 */
final class MergeReference {
    private MergeReference() {}

    static Function<String, ReferenceDump> finder(Path given, List<Path> search) {
        return sha -> {
            if (given == null) return ReferenceMatch.locateBySha256(sha, "", search);
            ReferenceDump d = ReferenceDump.open(given);
            if (!d.manifestSha256().equals(sha)) {
                throw new ConformException(Finding.REFERENCE_MISMATCH, "--reference " + given + " has manifest sha256 " + d.manifestSha256()
                        + "; the shards were judged against " + sha + ": name that one");
            }
            return d;
        };
    }
}
