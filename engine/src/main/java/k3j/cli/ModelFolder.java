package k3j.cli;

import java.nio.file.Files;
import java.nio.file.Path;
import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** The model folder a subcommand takes as its first argument; a path to the folder's config.json stands for the folder. */
final class ModelFolder {
    @Parameters(index = "0", arity = "0..1", paramLabel = "MODEL_DIR",
            description = "the model folder (config.json + safetensors shards); a path to its config.json is taken as the folder")
    Path path;

    @Spec(Spec.Target.MIXEE)
    CommandSpec mixee;

    boolean given() {
        return path != null;
    }

    /** The folder, or a usage error naming what is missing. */
    Path folder() {
        if (path == null) throw new CommandLine.ParameterException(mixee.commandLine(), "give the model folder: " + mixee.qualifiedName() + " MODEL_DIR ...");
        Path p = path;
        if (p.getFileName() != null && p.getFileName().toString().equals("config.json") && Files.isRegularFile(p)) {
            p = p.toAbsolutePath().getParent();
        }
        if (!Files.exists(p)) throw new CommandLine.ParameterException(mixee.commandLine(), "no such folder: " + path);
        if (!Files.isDirectory(p)) throw new CommandLine.ParameterException(mixee.commandLine(), "not a folder: " + path + " (give the model folder)");
        return p;
    }

    /** The folder's config.json, or a usage error when it has none. */
    Path config() {
        Path c = folder().resolve("config.json");
        if (!Files.exists(c, java.nio.file.LinkOption.NOFOLLOW_LINKS)) throw new CommandLine.ParameterException(mixee.commandLine(), "no config.json in " + path + " (is it a model folder?)");
        try {
            k3j.io.SafeFiles.requireRegular(c, "the model's config");
        } catch (java.io.IOException e) {
            throw new CommandLine.ParameterException(mixee.commandLine(), k3j.io.SafeFiles.why(e));
        }
        return c;
    }
}
