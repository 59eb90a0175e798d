package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/** The gates at the released widths and near-tie routing: {@code mvn verify -Pscale -Dk3.scale=build/scale-k3}. */
@Suite
@SuiteDisplayName("scale gates")
@SelectPackages("k3j.gates")
@IncludeTags({"scale"})
public class ScaleSuite {}
