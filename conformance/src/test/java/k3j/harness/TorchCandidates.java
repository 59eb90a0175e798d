package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import java.nio.file.Path;

/** The torch reference's candidates for the ports profile: {@code -Dk3.candidates=DIR}, written by dump_candidate.py --all-mutants. */
public final class TorchCandidates {
    private TorchCandidates() {}

    /** DIR, which must exist; a missing property fails (a gate that finds no data fails). */
    public static Path dir() {
        String p = Project.property("k3.candidates");
        if (p.isEmpty()) fail("gate data missing: -Dk3.candidates is not set (the torch candidates: reference-dumps/torch/dump_candidate.py ... --all-mutants)");
        Path path = Path.of(p);
        return Project.existing(path.isAbsolute() ? path : Project.root().resolve(path).normalize());
    }
}
