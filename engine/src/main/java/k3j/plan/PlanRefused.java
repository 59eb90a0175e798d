package k3j.plan;

/**
 * A memory plan that does not fit, raised where the plan is checked (before anything large is allocated) and
 * turned back into its message and exit code by the command that asked ({@link MemoryPlan.Refusal}).
 */
public final class PlanRefused extends RuntimeException {
    private final transient MemoryPlan.Refusal refusal;

    public PlanRefused(MemoryPlan.Refusal refusal) {
        super(refusal.message());
        this.refusal = refusal;
    }

    public MemoryPlan.Refusal refusal() {
        return refusal;
    }
}
