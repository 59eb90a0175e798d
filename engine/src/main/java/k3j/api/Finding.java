package k3j.api;

/**
 * What a compared layer, expert sweep or logits array amounts to against its reference (docs/semantics.md §10.7):
 * rounding misses a stage's budget by a few budgets at most, a wrong binding by ten thousand and more.
 */
public enum Finding {
    /** Every stage within its budget, the routing equal. */
    CONFORMS,
    /** The routing differs only at the reference's own near-ties, and every stage is within its budget with the reference's routing: a pass. */
    NEAR_TIE,
    /** Over budget, but under a hundred budgets: accumulation order or precision. */
    ROUNDING_DRIFT,
    /** Over budget on (nearly) every layer, the difference uncorrelated with the reference: a lower precision or noise. */
    PRECISION,
    /** A hundred budgets or more, or another routing decision, in one place: a wrong, swapped or transposed weight. */
    BINDING_ERROR,
    /** Over budget on (nearly) every layer of a kind, each first at the same stage: a wrong constant or formula in that stage. */
    WRONG_FORMULA,
    /** The checkpoint lacks a tensor the layer needs, or holds it with the wrong shape or dtype. */
    MISSING_TENSOR,
    /** The dump was made for other weights, or cannot be read. */
    REFERENCE_MISMATCH,
    /** A candidate dump lacks a stage (or the routing, or the logits) the reference has. */
    MISSING_STAGE,
    /** A NaN or an infinity in the engine's output or the reference's: it never passes. */
    NON_FINITE;

    /** {@return the bracketed tag {@code k3 conform} prints after a line, such as {@code [binding error]}} */
    public String tag() {
        return finding().tag();
    }

    k3j.verdict.Finding finding() {
        return k3j.verdict.Finding.valueOf(name());
    }

    static Finding of(k3j.verdict.Finding f) {
        return f == null ? null : valueOf(f.name());
    }
}
