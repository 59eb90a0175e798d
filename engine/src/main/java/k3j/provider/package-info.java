/**
 * A hosted provider's logprobs as evidence (docs/semantics.md §10.12): {@link k3j.provider.ProviderResponse} reads a
 * chat or completions response; {@link k3j.provider.ProviderGrade} grades the engine's logits against it by top-k KL
 * and top-1 agreement and gives the item the one decision judges.
 */
package k3j.provider;
