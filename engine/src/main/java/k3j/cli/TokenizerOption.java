package k3j.cli;

import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * {@code --tok DIR}, declared once: an argument group, required by tokenize ({@code multiplicity = "1"}),
 * optional in run, where only text input (--prompt, --prompt-file, --chat) needs it.
 */
final class TokenizerOption {
    @Option(names = "--tok", required = true, paramLabel = "DIR",
            description = "tokenizer directory (tiktoken.model + tokenizer_config.json); run needs it for --prompt, --prompt-file and --chat")
    Path dir;

    /** The directory named, or null when an optional group was not given. */
    static Path of(TokenizerOption t) {
        return t == null ? null : t.dir;
    }
}
