/**
 * The trunk (every layer's non-routed-expert tensors) packed into one file and streamed under a byte
 * budget (docs/semantics.md §5).
 *
 * <ul>
 *   <li>{@link k3j.trunk.TrunkPacker} ({@code k3 pack-trunk MODEL OUT}): each layer's trunk tensors must be ONE
 *       gap-free run in ONE shard (else refused naming the layer and bytes); runs copied verbatim to
 *       {@code trunk.bin} at 4096-aligned offsets, tails zero-padded; written as {@code .partial}, forced,
 *       re-read with O_DIRECT and CRC-32C compared, then renamed, {@code trunk.json} last.</li>
 *   <li>{@link k3j.trunk.TrunkManifest}: {@code trunk.json}, validated at open (align 4096, runs inside the
 *       file and disjoint, every layer present, tensors inside their runs, shapes match bytes) and checked
 *       against the checkpoint it was packed from by data: {@link k3j.trunk.DataBinding} (every tensor's SHA-256 recorded
 *       at the pack; at open, the tensors of every shard whose file identity moved re-hashed, or all with
 *       {@code --verify-trunk=full}).</li>
 *   <li>{@link k3j.trunk.TrunkPlan}: the fixed-point planner: pinned set (largest first) plus ring slots.</li>
 *   <li>{@link k3j.trunk.TrunkSource} / {@link k3j.trunk.LayerBytes}: what the forward calls:
 *       {@code acquire(layer)} / {@code release}; {@link k3j.trunk.TrunkStream} implements it with O_DIRECT
 *       reads into 2 MiB-aligned off-heap slots and a reader thread (never with one slot, pitfall 14) whose
 *       claims spare the held slot, slots being read into and layers about to be reached (pitfall 16).</li>
 *   <li>{@link k3j.trunk.TrunkStats}: hits, misses, bytes, read and wait time; the final report block.</li>
 * </ul>
 */
package k3j.trunk;
