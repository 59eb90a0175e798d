package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where the gates find their data. A gate whose data is missing FAILS, naming the path; it never skips.
 */
public final class Project {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Project() {}

    /** The repository root: {@code -Dk3.root} (set by the conformance pom), else the nearest parent holding oracle-fixtures/. */
    public static Path root() {
        String prop = System.getProperty("k3.root", "");
        if (!prop.isBlank()) return Path.of(prop).toAbsolutePath().normalize();
        for (Path p = Path.of("").toAbsolutePath(); p != null; p = p.getParent()) {
            if (Files.isDirectory(p.resolve("oracle-fixtures"))) return p;
        }
        return fail("cannot find the k3j root: set -Dk3.root or run from inside the repository");
    }

    /** A path under oracle-fixtures/ that must exist. */
    public static Path fixture(String relative) {
        return existing(root().resolve("oracle-fixtures").resolve(relative));
    }

    /** oracle-fixtures/DIR/FILE after checking its sha256 against the files[] of oracle-fixtures/DIR/manifest.json. */
    public static Path pinnedFixture(String dir, String file) {
        Path p = fixture(dir + "/" + file);
        byte[] raw;
        try {
            raw = Files.readAllBytes(p);
        } catch (IOException e) {
            return fail("cannot read " + p + ": " + e.getMessage());
        }
        for (JsonNode f : json(fixture(dir + "/manifest.json")).path("files")) {
            if (f.path("file").asText().equals(file)) {
                if (!f.path("sha256").asText().equals(KernelFixtures.sha256(raw))) fail(p + ": sha256 differs from the manifest (stale or edited fixture)");
                return p;
            }
        }
        return fail("oracle-fixtures/" + dir + "/manifest.json does not pin " + file);
    }

    /** A path under reference-dumps/ that must exist. */
    public static Path dump(String relative) {
        return existing(root().resolve("reference-dumps").resolve(relative));
    }

    public static Path existing(Path p) {
        if (!Files.exists(p)) fail("gate data missing: " + p + " (a gate that finds no data fails; regenerate the fixtures, see README)");
        return p;
    }

    /** Reads a JSON file that must exist and parse. */
    public static JsonNode json(Path p) {
        existing(p);
        try {
            return JSON.readTree(p.toFile());
        } catch (IOException e) {
            return fail("cannot read " + p + ": " + e.getMessage());
        }
    }

    /** Deletes a scratch directory and everything in it (nothing when null). */
    public static void deleteTree(Path dir) throws IOException {
        if (dir == null) return;
        try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) Files.delete(p);
        }
    }

    /** A checked-in input of a fuzz target's corpus (FuzzGate replays them), which must exist. */
    public static Path fuzzSeed(String target, String name) {
        return existing(root().resolve("conformance/src/test/resources/k3j/gates/FuzzGateInputs").resolve(target).resolve(name));
    }

    /** A system property the checkpoint profile passes through (k3.model, k3.reference, k3.layers); blank when unset. */
    public static String property(String name) {
        return System.getProperty(name, "").trim();
    }
}
