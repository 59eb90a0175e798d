/** Tests of the k3 command run in-process ({@link k3j.cli.CliRun}): exit codes, messages, reports. */
package k3j.cli;
