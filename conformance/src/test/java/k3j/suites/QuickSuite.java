package k3j.suites;

import org.junit.platform.suite.api.ExcludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** The quick loop: the weightless gates but the slow ones CI runs (faults in child JVMs, fuzz): {@code ci/test --quick}, i.e. {@code mvn verify -Pquick}. */
@Suite
@SuiteDisplayName("quick loop")
@SelectPackages("k3j.gates")
@ExcludeTags({"checkpoint", "ports", "fanout", "scale", "faults", "fuzz", "probe"})
public class QuickSuite {}
