package k3j.cli;

import picocli.CommandLine.Option;

/** {@code --list-presets}: printed by {@link K3#execute} before anything is parsed, wherever it stands on the line; declared here for --help. */
final class ListPresetsOption {
    static final String NAME = "--list-presets";

    @Option(names = NAME, description = "print the preset table and exit 0 (no model needed)")
    boolean listPresets;
}
