package k3j.compare;

import k3j.model.LayerStages;

/** The activations of one layer before they are compared: its stages, or the report of why there are none. */
public sealed interface LayerRun {
    /** The layer ran (or the candidate holds it); a stage the candidate lacks is null in {@code stages}. */
    record Ran(LayerStages stages, double seconds) implements LayerRun {}

    /** Nothing to compare: the layer did not bind, did not run, or the candidate does not hold it. */
    record Failed(LayerReport report) implements LayerRun {}
}
