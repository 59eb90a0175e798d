package k3j.cli;

import java.nio.file.Path;
import java.util.List;

/** Where the commands look for reference dumps when none is named: the one search the API makes too ({@link k3j.dump.ReferenceMatch#searchDirs}). */
final class ReferenceSearch {
    private ReferenceSearch() {}

    static List<Path> dirs(List<Path> extra) {
        return k3j.dump.ReferenceMatch.searchDirs(extra);
    }
}
