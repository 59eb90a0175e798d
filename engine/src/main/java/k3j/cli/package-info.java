/**
 * The {@code k3} command (docs/semantics.md §7): {@link k3j.cli.K3} dispatches to the run command and the
 * subcommands ({@code inspect}, {@code pack-trunk}, {@code sim-cache}, {@code doctor}, {@code conform},
 * {@code bisect}, {@code corrupt}); {@link k3j.cli.ExitCode} lists the exit codes.
 */
package k3j.cli;
