/**
 * Bisect: find the first layer and stage where the engine leaves the torch reference, then diagnose it by
 * re-running that layer with candidate weight mix-ups (same-shaped tensors swapped, a matrix stored
 * transposed, an expert's nibble order flipped, two experts swapped) and naming the one that makes the
 * stage pass. Also the corruption writer that proves the harness catches those mix-ups (MutationGate).
 *
 * <p>Data flow: k3j.dump and k3j.compare (the dump, matched to the model; one layer from the dump's inputs, every stage
 * against its budget) → {@link k3j.bisect.FaultStage} (the first failing stage) → {@link k3j.bisect.Candidates}
 * → {@link k3j.bisect.LayerRunner} / {@link k3j.bisect.LayerConformance} (the layer re-run and judged with a
 * candidate applied) → {@link k3j.bisect.Bisect} (the verdict). {@link k3j.bisect.Corruptions} writes corrupted checkpoint copies.
 */
package k3j.bisect;
