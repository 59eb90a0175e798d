package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** The ports gates: {@code mvn verify -Pports}. */
@Suite
@SuiteDisplayName("ports gates")
@SelectPackages("k3j.gates")
@IncludeTags({"ports", "fanout", "differential"})
public class PortsSuite {}
