package k3j.cli;

import picocli.CommandLine;
import picocli.CommandLine.Option;

/** {@code --lossy [--max-kl NATS] [--min-top1 PERCENT]}: grade a quantised port by KL divergence (compare-logits, conform). */
final class LossyOptions {
    @Option(names = "--lossy", description = "grade a lossy (quantised) port instead of judging it by the float32 budget: KL(ref||cand) per position, "
            + "same top-1, dp, rank (and for a candidate NMSE/cosine per layer and stage, and the layer where the error grows most)")
    boolean on;

    @Option(names = "--max-kl", paramLabel = "NATS", description = "--lossy: the largest mean KL(ref||cand) accepted (default 0.5, k3j/verdict/verdict-limits.json)")
    Double maxKl;

    @Option(names = "--min-top1", paramLabel = "PERCENT", description = "--lossy: the smallest share of positions with the reference's top token accepted, in percent (default 25)")
    Double minTop1;

    @Option(names = "--max-dlogprob", paramLabel = "NATS", description = "against a provider response: the largest mean |dlogprob| over the provider's top-k accepted "
            + "(default 0.1 when no threshold is given; with no threshold given the defaults are same top-1 >= 90%% and mean |dlogprob| <= 0.1)")
    Double maxDlogprob;

    /** Refuses thresholds without --lossy and values out of range. */
    void validate(CommandLine cmd) {
        if (!on && (maxKl != null || minTop1 != null)) throw new CommandLine.ParameterException(cmd, "--max-kl and --min-top1 grade a --lossy comparison: add --lossy");
        if (maxDlogprob != null) throw new CommandLine.ParameterException(cmd, "--max-dlogprob grades against a provider response (--reference RESPONSE.json)");
        validateValues(cmd);
    }

    /** Refuses values out of range (a provider response is always graded: no --lossy needed there). */
    void validateValues(CommandLine cmd) {
        if (maxDlogprob != null && !(maxDlogprob >= 0)) throw new CommandLine.ParameterException(cmd, "--max-dlogprob must be a number >= 0");
        if (maxKl != null && !(maxKl >= 0)) throw new CommandLine.ParameterException(cmd, "--max-kl must be a number >= 0");
        if (minTop1 != null && !(minTop1 >= 0 && minTop1 <= 100)) throw new CommandLine.ParameterException(cmd, "--min-top1 is a percentage 0..100");
    }
}
