/**
 * Continuous batching ({@link k3j.api.Serving}): a bounded queue, sequences admitted into slots between steps, each
 * step one {@link k3j.model.BatchStep} over every active sequence's prefill chunk or decode token, each sequence with
 * its own state and seeded sampler.
 */
package k3j.batch;
