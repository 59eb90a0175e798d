/**
 * Checkpoint conformance: a model against the torch reference dump made for it
 * (docs/formats.md §7 and §9; docs/semantics.md §10.7).
 *
 * <p>Data flow: {@link k3j.conform.ReferenceDump} (directory, .tar.gz or .tar.xz; sizes and sha256 checked) →
 * {@link k3j.conform.ReferenceMatch} (the dump whose manifest lists the model's shards with the same sizes and
 * header sha256, and the same config; {@code verifyData} hashes everything) → {@link k3j.conform.Conformance}
 * (the model bound once; {@code layer(i)} runs one layer alone from the dump's inputs and returns a
 * {@link k3j.conform.LayerReport}: a {@link k3j.conform.StageMetric} per {@link k3j.conform.Stage} against the
 * {@link k3j.conform.Budget}, the {@link k3j.conform.Routing}, a {@link k3j.conform.Finding};
 * {@code teacherForcing} / {@code greedy} give {@link k3j.conform.LogitParity} results) →
 * {@link k3j.conform.Charts} (SVG). Failure messages start with the finding's bracketed tag, which
 * reports/categories.json matches. Used by the checkpoint gates, {@code k3 conform} and {@code k3 bisect}.
 */
package k3j.conform;
