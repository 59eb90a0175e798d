package k3j.cli;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Function;
import k3j.dump.ReferenceDump;
import k3j.dump.ReferenceMatch;
import picocli.CommandLine;

/**
 * What {@code k3 conform} prints without judging anything: {@code --shard-plan N} (the work plan every shard of an
 * N-shard run computes) and {@code --verify-data} (every file of the model hashed against the dump's sha256 list).
 * Neither is a verdict.
 */
final class ConformShardPlan {
    private ConformShardPlan() {}

    /** --shard-plan N: each shard's layers, logit part, expert ranges, bytes read and work, from the model's headers and the matching dump's token counts. */
    static int plan(Path config, Path reference, List<Path> search, boolean logits, boolean experts, int shards, PrintWriter out,
                    Function<String, CommandLine.ParameterException> usage) {
        if (shards < 1) throw usage.apply("--shard-plan " + shards + ": give a count of 1 or more");
        Path model = config.getParent();
        var cfg = k3j.config.ConfigReader.read(config);
        var index = k3j.io.CheckpointIndex.open(model);
        ReferenceDump d = ReferenceMatch.locate(model, reference, search);
        int tokens = d.ids().length, generated = d.generatedIds().length;
        k3j.fleet.WorkPlan plan;
        try {
            plan = k3j.fleet.WorkPlan.of(index.tensors(), cfg, tokens, generated, logits, experts, shards);
        } catch (IllegalArgumentException e) {
            throw usage.apply("--shard-plan " + shards + ": " + e.getMessage());
        }
        out.println("model     : " + model + " (" + cfg.layerCount() + " layers)");
        out.println("reference : " + d.source() + " (" + tokens + " ids, " + generated + " generated)");
        out.print(plan.table());
        return ExitCode.OK;
    }

    /** --verify-data: every listed file's sha256 against the dump's; a mismatch throws, naming the file. */
    static int verifyData(Path model, Path reference, List<Path> search, PrintWriter out) {
        ReferenceDump d = ReferenceMatch.locate(model, reference, search);
        out.println("reference: " + d.source());
        ReferenceMatch.verifyData(d, model, out::println);
        out.println("VERIFIED: every listed file's sha256 equals the dump's");
        return ExitCode.OK;
    }
}
