package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** A live server judged by the probe ({@code -Dk3.url=URL -Dk3.model=DIR}): {@code mvn verify -Pprobe}. */
@Suite
@SuiteDisplayName("probe")
@SelectPackages("k3j.gates")
@IncludeTags("probe")
public class ProbeSuite {}
