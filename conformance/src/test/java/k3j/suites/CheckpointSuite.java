package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** Per-layer conformance and logit parity of a real checkpoint ({@code -Dk3.model=DIR}): {@code mvn verify -Pcheckpoint}. */
@Suite
@SuiteDisplayName("checkpoint gates")
@SelectPackages("k3j.gates")
@IncludeTags("checkpoint")
public class CheckpointSuite {}
