/**
 * Checkpoint comparison: a model run against the reference dump made for it, stage by stage and logit by logit
 * (docs/formats.md §7 and §9; docs/semantics.md §10.7).
 *
 * <p>Data flow: a {@link k3j.dump.ReferenceDump} matched to the model ({@link k3j.dump.ReferenceMatch}) →
 * {@link k3j.compare.Conformance} (the model bound once; {@code layer(i)} runs one layer alone from the dump's inputs
 * and returns a {@link k3j.compare.LayerReport}: a {@link k3j.compare.StageMetric} per {@link k3j.dump.Stage} against
 * the {@link k3j.dump.Budget}, the {@link k3j.compare.Routing}, a {@link k3j.verdict.Finding};
 * {@code teacherForcing} / {@code greedy} give {@link k3j.compare.LogitParity} results) → {@link k3j.compare.Causes}
 * (the run's cause, from every layer together) → {@link k3j.compare.Charts} (SVG). The lossy grades
 * ({@link k3j.compare.LossyLayers}, {@link k3j.compare.LossyLogits}), the expert sweep ({@link k3j.compare.ExpertSweep})
 * and self-divergence are here too. Each kind of evidence gives its own items of the one decision
 * ({@link k3j.verdict.Invariants}); nothing here decides. Used by the checkpoint gates, {@code k3 conform} and
 * {@code k3 bisect}.
 */
package k3j.compare;
