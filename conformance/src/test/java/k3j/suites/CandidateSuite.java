package k3j.suites;

import org.junit.platform.suite.api.ExcludeTags;
import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/**
 * The checkpoint gates judging another engine's candidate dump ({@code -Dk3.candidate=DUMP}): {@code mvn verify -Pcandidate}.
 * The gates tagged {@code model} judge k3j's own forward over {@code -Dk3.model} and do not apply to a candidate.
 */
@Suite
@SuiteDisplayName("candidate gates")
@SelectPackages("k3j.gates")
@IncludeTags("checkpoint")
@ExcludeTags("model")
public class CandidateSuite {}
