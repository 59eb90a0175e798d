package k3j.cli;

import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * {@code --reference DUMP}, declared once for every subcommand that reads a reference dump. It is an argument
 * group so that each subcommand says whether it needs one: {@code multiplicity = "1"} where nothing can stand
 * in for it (bisect, compare-logits), optional where the dump matching the model is searched for (conform, run).
 */
final class ReferenceOption {
    @Option(names = "--reference", required = true, paramLabel = "DUMP",
            description = "the reference dump (a folder, .tar.gz or .tar.xz) made from these weights; refused if made for other weights")
    Path dump;

    /** The dump named, or null when an optional group was not given. */
    static Path of(ReferenceOption r) {
        return r == null ? null : r.dump;
    }
}
