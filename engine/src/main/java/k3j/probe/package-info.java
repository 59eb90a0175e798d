/**
 * {@code k3 probe URL}: a live OpenAI-compatible endpoint judged against a reference (k3j on a model folder, or a
 * reference dump). Per prompt and form the endpoint's logprobs are graded through the provider grade and the one
 * decision ({@link k3j.provider.ProviderGrade}, {@link k3j.verdict.Invariants#decide}); a battery of invariance
 * properties (the same request repeated, alone against inside a batch, after a request sharing its prefix, a long
 * prompt against its short prefix, streamed against not, completions against chat) holds when the answers' bits are
 * equal. {@link k3j.probe.Probe} runs it; {@code k3 probe} prints it.
 */
package k3j.probe;
