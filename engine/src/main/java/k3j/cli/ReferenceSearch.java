package k3j.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;

/** Where the commands look for reference dumps when none is named. */
final class ReferenceSearch {
    private ReferenceSearch() {}

    /** {@code extra}, ./reference-dumps, and the reference-dumps/ of the repository the jar was built in. */
    static List<Path> dirs(List<Path> extra) {
        LinkedHashSet<Path> s = new LinkedHashSet<>(extra);
        s.add(Path.of("reference-dumps"));
        try {
            Path jar = Path.of(ReferenceSearch.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            for (Path p = jar.getParent(); p != null; p = p.getParent()) {
                if (Files.isDirectory(p.resolve("reference-dumps"))) {
                    s.add(p.resolve("reference-dumps"));
                    break;
                }
            }
        } catch (Exception ignored) {
            // no code source (unusual class loader): the other folders still count
        }
        return new ArrayList<>(s);
    }
}
