package k3j.api;

import k3j.verdict.Finding;

/**
 * A conformance that cannot be judged: no reference dump found (name one with
 * {@link Conform.Options#withReference}), a dump or candidate refused (made for other weights, another prompt,
 * arrays other than the reference's), or a model folder that cannot be read. The API's one exception for these; its
 * {@link #finding()} says which kind.
 */
public final class CannotJudge extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** What the refusal amounts to. */
    private final Finding finding;

    CannotJudge(Finding finding, String message, Throwable cause) {
        super(message, cause);
        this.finding = finding;
    }

    /** {@return what the refusal amounts to, such as {@link Finding#REFERENCE_MISMATCH}} */
    public Finding finding() {
        return finding;
    }

    /** The API's form of an engine-internal refusal: its message naming the API's options rather than the command's flags. */
    static CannotJudge of(RuntimeException e) {
        String msg = String.valueOf(e.getMessage()).replace(k3j.dump.ReferenceMatch.NAME_IT, "Conform.Options.withReference(dump, dirs)");
        Finding f = e instanceof k3j.verdict.ConformException c ? c.finding() : Finding.MISSING_TENSOR;   // an unreadable model folder
        return new CannotJudge(f, msg, e);
    }
}
