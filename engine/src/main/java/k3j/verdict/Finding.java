package k3j.verdict;


/**
 * What a compared layer (or a refused run) amounts to. The ratio bands follow the budget rule (docs/semantics.md §10.7): rounding
 * misses a stage's budget by about 1e-6 of max|ref|, a wrong binding by about 1 (so by 10^4 budgets and more);
 * 100 budgets separate the two with room on both sides.
 */
public enum Finding {
    /** every stage within its budget, routing equal */
    CONFORMS("[conforms]"),
    /**
     * routing differs only at reference near-ties (a top-K gap within the float32 score drift, {@link k3j.compare.Routing}) and
     * every stage, run with the reference's routing forced, is within its budget: a pass
     */
    NEAR_TIE("[near-tie]"),
    /** over budget but under {@value #BINDING_RATIO} budgets: accumulation order or precision */
    ROUNDING_DRIFT("[rounding drift]"),
    /**
     * over budget on (nearly) every layer, the difference uncorrelated with the reference: a lower precision or noise,
     * not a wrong computation (a run-level category, {@link k3j.compare.Causes})
     */
    PRECISION("[precision]"),
    /** {@value #BINDING_RATIO} budgets or more, or a different routing decision, localised: a wrong, swapped or transposed weight */
    BINDING_ERROR("[binding error]"),
    /**
     * over budget on (nearly) every layer of a kind, each first at the same stage: a wrong constant or formula in
     * that stage's code, not a weight (a run-level category, {@link k3j.compare.Causes})
     */
    WRONG_FORMULA("[wrong constant or formula]"),
    /** the checkpoint lacks a tensor the layer needs or holds it with the wrong shape or dtype */
    MISSING_TENSOR("[missing tensor]"),
    /** the dump was made for other weights, or is unreadable */
    REFERENCE_MISMATCH("[reference mismatch]"),
    /** a candidate dump lacks a stage (or the routing, or the logits) the reference has: the engine did not produce it */
    MISSING_STAGE("[missing stage]"),
    /** a NaN or an infinity in the engine's output or the reference's: no ratio can judge it, so it never passes */
    NON_FINITE("[non-finite]");

    /** Ratio to budget at and above which a miss is a binding error, not rounding. */
    public static final double BINDING_RATIO = 100.0;

    private final String tag;

    Finding(String tag) {
        this.tag = tag;
    }

    /** The bracketed tag failure messages start with (matched by reports/categories.json). */
    public String tag() {
        return tag;
    }

    /** Whether the verdict is a pass (conforms, or conforms apart from near-tie routing). */
    public boolean passes() {
        return this == CONFORMS || this == NEAR_TIE;
    }

    /** The finding for a worst ratio to budget of finite arrays (an infinite or NaN ratio is a binding error). */
    public static Finding ofRatio(double ratioToBudget) {
        if (ratioToBudget <= 1.0) return CONFORMS;
        if (ratioToBudget < BINDING_RATIO) return ROUNDING_DRIFT;
        return BINDING_ERROR;
    }
}
