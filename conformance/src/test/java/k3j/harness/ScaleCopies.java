package k3j.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import k3j.bisect.Corruption;
import k3j.bisect.Corruptions;

/**
 * Corrupted copies of the scale fixture shared by the scale gates: the same corruptions give the same copy, written
 * once per test JVM ({@link Corruptions#write}: the touched shards copied sparsely, every other file hard-linked)
 * under {@code build/scale-copies/NAME} and deleted when the JVM exits. A copy is made fresh in each JVM (a folder
 * left by an earlier run is deleted first), so it never outlives the corruptions it was written from; its users only
 * read it.
 */
public final class ScaleCopies {
    private static final Map<List<Corruption>, Path> made = new HashMap<>();

    private ScaleCopies() {}

    /** The copy of {@code model} with {@code corruptions}, in a folder named {@code name} (distinct per corruption list). */
    public static synchronized Path of(Path model, String name, List<Corruption> corruptions) {
        Path copy = made.get(corruptions);
        if (copy != null) return copy;
        copy = Project.root().resolve("build/scale-copies").resolve(name);
        if (made.containsValue(copy)) throw new IllegalArgumentException(copy + " already holds other corruptions");
        try {
            Project.deleteTree(Files.exists(copy) ? copy : null);
            Files.createDirectories(copy.getParent());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (made.isEmpty()) Runtime.getRuntime().addShutdownHook(new Thread(ScaleCopies::deleteAll));
        Corruptions.write(model, copy, corruptions);
        made.put(List.copyOf(corruptions), copy);
        return copy;
    }

    private static synchronized void deleteAll() {
        for (Path p : made.values()) {
            try {
                Project.deleteTree(p);
            } catch (IOException e) {
                System.err.println("cannot delete " + p + ": " + e.getMessage());
            }
        }
    }
}
