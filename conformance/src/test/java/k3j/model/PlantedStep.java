package k3j.model;

/** The batch-invariance gate's batch-reduction mutant: a {@link BatchStep} whose final norm takes one mean square over every row of the step. */
public final class PlantedStep {
    private PlantedStep() {}

    /**
     * The mutant step.
     *
     * @param forward the forward
     * @return the step with the fault planted
     */
    public static BatchStep batchReduction(Forward forward) {
        return new BatchStep(forward, BatchStep.Fault.BATCH_NORM);
    }
}
