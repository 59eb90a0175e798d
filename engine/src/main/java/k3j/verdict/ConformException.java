package k3j.verdict;

/**
 * A conformance run that cannot produce a verdict: the dump is unreadable or was made for other weights, the
 * model lacks a tensor. The message starts with the {@link Finding#tag() tag} of its finding, which the
 * Allure categories (reports/categories.json) match.
 */
public final class ConformException extends RuntimeException {
    private final Finding finding;

    public ConformException(Finding finding, String message) {
        this(finding, message, null);
    }

    public ConformException(Finding finding, String message, Throwable cause) {
        super(finding.tag() + " " + message, cause);
        this.finding = finding;
    }

    public Finding finding() {
        return finding;
    }
}
