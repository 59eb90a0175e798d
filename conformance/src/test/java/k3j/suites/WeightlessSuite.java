package k3j.suites;

import org.junit.platform.suite.api.ExcludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** The gates that need no real checkpoint, but the slow ones ({@link SlowSuite}): {@code ci/test}, i.e. {@code mvn verify -Pweightless}. */
@Suite
@SuiteDisplayName("weightless gates")
@SelectPackages("k3j.gates")
@ExcludeTags({"checkpoint", "ports", "fanout", "scale", "differential", "faults", "fuzz", "interpreter", "probe", "fleet", "serving-faults"})
public class WeightlessSuite {}
