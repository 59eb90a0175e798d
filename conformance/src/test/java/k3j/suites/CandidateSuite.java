package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** The checkpoint gates judging another engine's candidate dump ({@code -Dk3.candidate=DUMP}): {@code mvn verify -Pcandidate}. */
@Suite
@SuiteDisplayName("candidate gates")
@SelectPackages("k3j.gates")
@IncludeTags("checkpoint")
public class CandidateSuite {}
