package k3j;

import java.nio.file.Files;
import java.nio.file.Path;

/** Files of the repository (oracle fixtures, reference dumps) as the engine's tests find them, from any working directory below it. */
public final class Repo {
    private Repo() {}

    /** {@code relative} under the nearest directory at or above the working directory that holds it; missing fails. */
    public static Path path(String relative) {
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.exists(p.resolve(relative))) return p.resolve(relative);
        }
        throw new AssertionError(relative + " not found above " + Path.of("").toAbsolutePath());
    }
}
