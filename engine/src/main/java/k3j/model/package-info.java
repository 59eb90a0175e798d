/**
 * The model: checkpoint names bound to kernel arguments, and the forward pass that orchestrates the kernels.
 *
 * <p>Data flow: {@link k3j.model.Binder} (headers only: names, shapes, dtypes, expert locations; one
 * {@link k3j.model.BindException} for everything that does not fit) → {@link k3j.model.ModelBinding} →
 * {@link k3j.model.WeightLoader} (BF16 / F32 matrices mapped in place, vectors widened) →
 * {@link k3j.model.ModelWeights} (sealed {@link k3j.model.TokenMixer} KDA | MLA, sealed {@link k3j.model.Mlp}
 * Dense | LatentMoe) → {@link k3j.model.Forward} (full recompute, incremental with a
 * {@link k3j.model.DecodeState}, one layer from given inputs with every {@link k3j.model.LayerStages stage}) →
 * {@link k3j.model.Generation} (greedy ids). Routed experts come through {@link k3j.cache.ExpertSource}:
 * {@link k3j.model.CheckpointExperts} keeps them resident (and is the {@link k3j.cache.ExpertLocator} an
 * {@link k3j.cache.ExpertCache} needs); a failed load fails the forward ({@link k3j.model.ExpertDropException}).
 * Decoder layers come through {@link k3j.model.LayerSource}: resident (bound once), or
 * {@link k3j.model.StreamedLayers}, which acquires each layer from a packed trunk ({@link k3j.trunk.TrunkSource}),
 * binds it from the run's bytes and releases it once computed (bit-identical to resident: same bytes, same kernels,
 * same order); a failed trunk read fails the forward. {@link k3j.model.Model} opens a directory end to end.
 */
package k3j.model;
