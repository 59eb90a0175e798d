/**
 * Dumps written from this engine's own run (docs/formats.md §7): {@link k3j.capture.ReferenceWriter} (a reference
 * made by k3j, labelled so) and {@link k3j.capture.CandidateWriter} (a candidate dump of this engine, what a port
 * writes for {@code k3 conform --candidate}).
 */
package k3j.capture;
