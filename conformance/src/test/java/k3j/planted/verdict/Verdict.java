package k3j.planted.verdict;

/** The planted tree's verdict value (legal: constructed only by {@link Invariants}). */
public record Verdict(String outcome) {
    public int exitCode() {
        return outcome.equals("CONFORMS") ? 0 : 1;
    }
}
