/**
 * The strict config reader (docs/semantics.md §1): {@link k3j.config.ConfigReader} reads the nested or flat
 * {@code config.json} into a {@link k3j.config.ModelConfig}, reporting every missing field at once and never
 * guessing one ({@link k3j.config.ConfigException}); {@link k3j.config.LayerKind} and {@link k3j.config.MlpKind}
 * are the per-layer choices of the layer map.
 */
package k3j.config;
