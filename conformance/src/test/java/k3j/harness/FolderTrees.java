package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** Whole folder trees for the gates that build shard roots: copied file by file, or deleted (a tree that is not there fails). */
public final class FolderTrees {
    private FolderTrees() {}

    /** Copies the tree under {@code from} to {@code to}, folders and regular files alike. */
    public static void copy(Path from, Path to) throws IOException {
        try (Stream<Path> s = Files.walk(from)) {
            for (Path p : s.toList()) {
                Path t = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(t);
                else Files.copy(p, t);
            }
        }
    }

    /** Deletes the tree at {@code p}, which must exist. */
    public static void delete(Path p) throws IOException {
        if (!Files.exists(p)) fail("nothing to delete at " + p);
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(q);
        }
    }
}
