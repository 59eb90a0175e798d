package k3j.harness;

/**
 * The report's top-level groups, in the order a reader follows a failure from cause to symptom: the model as a
 * whole, its layers, their experts, the logits and greedy ids they produce; then the engine's other gates and
 * the harness's own tests. The number in each title keeps that order in a report sorted by name.
 */
public enum ReportPart {
    MODEL("1 · model"),
    LAYERS("2 · layers"),
    EXPERTS("3 · experts, layer by layer"),
    LOGITS("4 · logits and greedy ids"),
    GATES("5 · engine gates"),
    HARNESS("6 · harness self-tests");

    /** The report's label that holds a case's part (the first level of the report's tree). */
    public static final String LABEL = "part";

    public final String title;

    ReportPart(String title) {
        this.title = title;
    }
}
