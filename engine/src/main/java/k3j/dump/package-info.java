/**
 * Conformance dumps, read and checked (docs/formats.md §7 and §9): a torch {@link k3j.dump.ReferenceDump} (directory,
 * .tar.gz or .tar.xz; sizes and sha256 checked) or a port's {@link k3j.dump.CandidateDump} (a folder, or one
 * .safetensors or .npz file, {@link k3j.dump.CandidateFile}), their layout against the model's config
 * ({@link k3j.dump.DumpLayout}, {@link k3j.dump.DumpCheck}), the rounding {@link k3j.dump.Budget} and the dump whose
 * manifest names the model's shards ({@link k3j.dump.ReferenceMatch}). Anything unreadable or made for other weights
 * is a {@link k3j.verdict.ConformException} tagged [reference mismatch].
 */
package k3j.dump;
