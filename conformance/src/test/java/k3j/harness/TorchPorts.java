package k3j.harness;

import static org.junit.jupiter.api.Assertions.fail;

import io.qameta.allure.Allure;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import k3j.compare.Causes;
import k3j.compare.Charts;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.compare.LayerSelection;
import k3j.dump.ReferenceDump;

/**
 * The torch reference's candidate dumps of mini-k3-93 ({@code -Dk3.candidates=DIR}, written by
 * reference-dumps/torch/dump_candidate.py --all-mutants): one folder per port or mutant, judged against the
 * checked-in reference dump.
 */
public final class TorchPorts {
    private TorchPorts() {}

    /** The mutants the reference dump's manifest names; none is a data error. */
    public static Stream<String> mutants() {
        List<String> names = new ArrayList<>();
        reference().field("mutants").forEach(m -> names.add(m.path("name").asText()));
        if (names.isEmpty()) fail("gate data missing: the mini-k3-93 dump lists no mutant");
        return names.stream();
    }

    public static Conformance candidate(String name) {
        Path dir = folder().resolve(name);
        Project.existing(dir);
        return Conformance.candidate(dir, Project.dump("mini-k3-93"), List.of());
    }

    public static Path folder() {
        String p = Project.property("k3.candidates");
        if (p.isEmpty()) fail("gate data missing: -Dk3.candidates is not set (the torch candidates: reference-dumps/torch/dump_candidate.py ... --all-mutants)");
        Path path = Path.of(p);
        return Project.existing(path.isAbsolute() ? path : Project.root().resolve(path).normalize());
    }

    public static ReferenceDump reference() {
        return ReferenceDump.open(Project.dump("mini-k3-93"));
    }

    /** Every layer judged and given its cause, with the run's lines and the layers x stages chart as evidence. */
    public static List<LayerReport> layers(Conformance c) {
        List<LayerReport> judged = new ArrayList<>();
        for (int i = 0; i < c.layerCount(); i++) judged.add(c.layer(i));
        List<LayerReport> reports = Causes.classify(judged, c.dump());
        StringBuilder lines = new StringBuilder();
        for (LayerReport r : reports) lines.append(r.line()).append('\n');
        List<Integer> bad = reports.stream().filter(r -> !r.conforms()).map(LayerReport::layer).toList();
        Evidence.parameter("candidate", c.engine());
        Evidence.parameter("conforming layers", (reports.size() - bad.size()) + "/" + reports.size() + (bad.isEmpty() ? "" : "; failing " + LayerSelection.format(bad)));
        Evidence.text("layers", lines.toString());
        Allure.addAttachment("layers x stages (ratio to budget)", "image/svg+xml", Charts.overview(reports, c.engine()), ".svg");
        return reports;
    }
}
