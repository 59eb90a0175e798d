package k3j.harness;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * One shard process of a fanned-out run: {@code ShardRun CLASS} runs one gate class on the JUnit platform in
 * this JVM, with whatever -Dk3.model / -Dk3.layers / -Dallure.results.directory it was started with, exactly as
 * a runner's {@code mvn verify -Dk3.layers=RANGE -Dtest=CLASS} would, and prints "N passed, N failed".
 * Exit 0 when the run completed (its verdicts are in the results folder), 3 when the class could not run.
 */
public final class ShardRun {
    private ShardRun() {}

    public static void main(String[] args) throws ClassNotFoundException {
        if (args.length != 1) {
            System.err.println("usage: ShardRun GATE_CLASS");
            System.exit(3);
        }
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request().selectors(selectClass(Class.forName(args[0]))).build();
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener summary = new SummaryGeneratingListener();
        launcher.execute(request, summary);
        TestExecutionSummary s = summary.getSummary();
        s.getFailures().forEach(f -> System.out.println("FAILED " + f.getTestIdentifier().getDisplayName() + ": " + f.getException().getMessage()));
        System.out.println("shard: " + s.getTestsSucceededCount() + " passed, " + s.getTestsFailedCount() + " failed");
        System.exit(s.getTestsFoundCount() == 0 ? 3 : 0);
    }
}
