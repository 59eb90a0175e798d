package k3j.harness;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import k3j.compare.Conformance;
import k3j.compare.LayerReport;
import k3j.fleet.Identity;
import k3j.fleet.Judged;
import k3j.fleet.ShardFolder;
import k3j.fleet.ShardId;
import k3j.fleet.WorkPlan;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestPlan;

/**
 * {@code -Dk3.shard=I/N -Dk3.results=ROOT} for the checkpoint profile: the shard's folder ROOT/shard-I-of-N/ as
 * {@code k3 conform --shard} writes it (docs/formats.md §18.3), so {@code k3 conform --merge ROOT} merges Maven shards
 * like CLI shards. The plan before the first case runs; at the end the layers {@link LayerConformanceGate} judged (as
 * run, before the causes), the logit part when the shard holds it, this run's Allure results (ROOT/shard-I-of-N/
 * allure-results, for {@code ci/report ROOT}), and the completion marker last. A run that judged fewer layers than its
 * part (another -Dtest, a crash) writes no marker: the merge calls the shard unfinished.
 */
public final class ShardFolders implements TestExecutionListener {
    private static final List<LayerReport> JUDGED = new ArrayList<>();
    private Path dir;
    private ShardId id;
    private Identity identity;
    private WorkPlan.Part part;
    private FileTime started;

    /** What {@code LayerConformanceGate} judged, each layer as run (before the causes): what the shard's results hold. */
    public static void layersJudged(List<LayerReport> asRun) {
        synchronized (JUDGED) {
            JUDGED.clear();
            JUDGED.addAll(asRun);
        }
    }

    @Override
    public void testPlanExecutionStarted(TestPlan testPlan) {
        String shard = Project.property("k3.shard"), results = Project.property("k3.results");
        if (shard.isEmpty() && results.isEmpty()) return;
        if (shard.isEmpty() || results.isEmpty()) throw new IllegalStateException("-Dk3.shard=I/N and -Dk3.results=ROOT go together (docs/formats.md §18)");
        try {
            started = FileTime.fromMillis(System.currentTimeMillis() - 1000);
            Conformance c = CheckpointUnderTest.open();
            Path model = CheckpointUnderTest.resolve(Project.property("k3.model"));
            id = ShardId.parse(shard, System.getenv());
            var index = k3j.io.CheckpointIndex.open(model);
            WorkPlan plan = WorkPlan.of(index.tensors(), k3j.config.ConfigReader.read(model.resolve("config.json")), c.tokens(), c.dump().generatedIds().length, true, false, id.count());
            part = plan.part(id.index());
            identity = new Identity(Identity.model(model, index.shards(), index.tensors()), c.dump().manifestSha256(), Identity.runningBuild(), id.count(),
                    "logits=true experts=false", Identity.plan(plan));
            dir = ShardFolder.start(CheckpointUnderTest.resolve(results), id, identity, part, model);
            System.out.println("shard " + id + " of the plan " + identity.plan() + " -> " + dir);
        } catch (IOException e) {
            throw new IllegalStateException("-Dk3.shard=" + shard + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void testPlanExecutionFinished(TestPlan testPlan) {
        if (dir == null) return;
        try {
            Conformance c = CheckpointUnderTest.open();
            List<LayerReport> layers;
            synchronized (JUDGED) {
                layers = List.copyOf(JUDGED);
            }
            List<Integer> got = layers.stream().map(LayerReport::layer).toList();
            if (!got.equals(part.layers())) {
                System.out.println("shard " + id + " left unfinished: LayerConformanceGate judged layers " + got + ", the shard's part is " + part.layers());
                return;
            }
            List<Judged.Block> logits = new ArrayList<>();
            Judged.Block greedy = null;
            if (part.logits()) {
                for (boolean incremental : new boolean[] {false, true}) logits.add(Judged.logits(c.teacherForcing(incremental), null));
                greedy = Judged.greedy(c.greedy(), null);
            }
            Judged judged = new Judged(layers.stream().map(r -> new Judged.Layer(r, c.dump().layer(r.layer()).boundary())).toList(), null, List.of(), logits, greedy);
            copyAllureResults(dir.resolve("allure-results"));
            Path model = CheckpointUnderTest.resolve(Project.property("k3.model"));
            ShardFolder.finish(dir, id, identity, part, judged, k3j.fleet.TensorDigests.of(k3j.io.CheckpointIndex.open(model).tensors(), ShardFolder.judges(part)));
            System.out.println("shard " + id + " complete: " + dir.resolve(ShardFolder.DONE));
        } catch (IOException | RuntimeException e) {
            System.out.println("shard " + id + " left unfinished: " + e);
        }
    }

    /** This run's Allure results (written since it started) into the shard's folder. */
    private void copyAllureResults(Path to) throws IOException {
        String from = System.getProperty("allure.results.directory", "");
        if (from.isEmpty()) return;
        Path src = Path.of(from);
        if (!Files.isDirectory(src)) return;
        Files.createDirectories(to);
        try (Stream<Path> s = Files.list(src)) {
            for (Path p : s.filter(Files::isRegularFile).toList()) {
                if (Files.getLastModifiedTime(p).compareTo(started) >= 0) Files.copy(p, to.resolve(p.getFileName()), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            }
        }
    }
}
