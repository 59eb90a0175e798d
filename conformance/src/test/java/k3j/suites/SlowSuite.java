package k3j.suites;

import org.junit.platform.suite.api.IncludeTags;
import org.junit.platform.suite.api.SelectPackages;
import org.junit.platform.suite.api.Suite;
import org.junit.platform.suite.api.SuiteDisplayName;

/**
 * The slow weightless claims, a CI step of their own: faults in child JVMs, the fuzz corpora, the kernels in an
 * {@code -Xint} JVM, the shard merge over child runs, the probe against planted serving faults and every bit-identity
 * case ({@code mvn verify -Pslow}, which sets {@code k3.bitidentity=all}).
 */
@Suite
@SuiteDisplayName("slow weightless gates")
@SelectPackages("k3j.gates")
@IncludeTags({"faults", "fuzz", "interpreter", "fleet", "serving-faults", "bitidentity"})
public class SlowSuite {}
