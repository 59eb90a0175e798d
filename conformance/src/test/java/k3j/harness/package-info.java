/**
 * What the gates share: {@link k3j.harness.Project} finds fixtures and dumps, {@link k3j.harness.KernelFixtures}
 * reads the kernel fixtures, {@link k3j.harness.Evidence} attaches parameters and evidence to the Allure result,
 * {@link k3j.harness.AllureEnvironment} writes the report's environment, {@link k3j.harness.Heartbeat} keeps long
 * steps visible on the console.
 */
package k3j.harness;
