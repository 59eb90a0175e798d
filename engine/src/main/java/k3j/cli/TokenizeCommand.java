package k3j.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import k3j.tokenizer.Tokenizer;
import k3j.tokenizer.TokenizerException;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code k3 tokenize --tok DIR}: text (stdin or --file, raw bytes) to ids on one line, comma-separated — the
 * form {@code --ids} takes; with {@code --decode}, ids to the exact bytes they stand for.
 */
@Command(name = "tokenize", mixinStandardHelpOptions = true, version = K3.VERSION,
        description = "Encode text to token ids (or --decode ids to bytes) with a Kimi tokenizer directory.",
        footer = "Exit codes: 0 success, 1 unreadable or malformed tokenizer files, 2 bad arguments or ids.")
final class TokenizeCommand implements Callable<Integer> {
    @CommandLine.ArgGroup(exclusive = false, multiplicity = "1")
    TokenizerOption tok;

    @Option(names = "--decode", description = "read ids (',' or whitespace separated) and write their bytes")
    boolean decode;

    @Option(names = "--no-specials", description = "encode added tokens written in the text (e.g. <|end_of_msg|>) as ordinary text")
    boolean noSpecials;

    /** The most bytes tokenize reads (a larger text is split first): refused before it is allocated. */
    static final long MAX_INPUT = 256L << 20;

    @Option(names = "--file", paramLabel = "PATH", description = "read this file instead of stdin")
    Path file;

    @Option(names = "--output", paramLabel = "PATH", description = "write here instead of stdout (written whole or not at all; never "
            + "onto a device, the input or a tokenizer file: docs/files.md)")
    Path output;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Override
    public Integer call() throws IOException {
        PrintWriter err = spec.commandLine().getErr();
        try {
            new k3j.io.Outputs().input(file, "--file").input(tok.dir, "a tokenizer file (--tok)").file(output, "--output");
        } catch (IOException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        Tokenizer t;
        try {
            t = Tokenizer.load(tok.dir);
        } catch (TokenizerException e) {
            if (!Files.isDirectory(tok.dir)) throw new CommandLine.ParameterException(spec.commandLine(), "--tok " + e.getMessage());   // a wrong path is bad usage
            err.println("k3 tokenize: " + e.getMessage());
            return ExitCode.RUNTIME;
        }
        byte[] in;
        try {
            in = file != null ? k3j.io.SafeFiles.readAll(file, MAX_INPUT, "a text to tokenize (--file)") : k3j.io.SafeFiles.readAll(System.in, MAX_INPUT, "stdin");
        } catch (IOException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), k3j.io.SafeFiles.why(e));
        }
        byte[] result;
        if (decode) {
            int[] ids;
            try {
                ids = RunPrompt.parseIds(new String(in, StandardCharsets.UTF_8));
                result = t.decode(ids);
            } catch (TokenizerException | IllegalArgumentException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
            }
        } else {
            int[] ids;
            try {
                ids = t.encode(in, !noSpecials);
            } catch (TokenizerException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), e.getMessage());
            }
            StringBuilder sb = new StringBuilder();
            for (int id : ids) sb.append(sb.isEmpty() ? "" : ",").append(id);
            result = (sb + "\n").getBytes(StandardCharsets.US_ASCII);
        }
        if (output != null) {
            k3j.io.AtomicWrite.bytes(output, "--output", result);
        } else if (decode) {
            spec.commandLine().getOut().flush();
            OutputStream o = System.out;
            o.write(result);
            o.flush();
        } else {
            PrintWriter o = spec.commandLine().getOut();
            o.print(new String(result, StandardCharsets.US_ASCII));
            o.flush();
        }
        return ExitCode.OK;
    }
}
