/**
 * The {@code @Suite} classes, one per Maven profile (weightless, checkpoint, ports, candidate), so that a suite runs
 * from an IDE exactly as from Maven; {@code SuitesMatchProfilesTest} keeps their tags and the poms' groups equal;
 * {@code NoGateImportsAGateTest} keeps every gate standing alone over {@code k3j.harness}.
 */
package k3j.suites;
