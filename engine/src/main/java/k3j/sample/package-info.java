/** Choosing the next token (docs/semantics.md §8.5): greedy, or a seeded temperature / top-k / top-p {@link k3j.sample.Sampler} over {@link k3j.sample.Pcg32}. */
package k3j.sample;
