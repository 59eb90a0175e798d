/**
 * Checkpoint → bytes: the validated safetensors reader.
 *
 * <ul>
 *   <li>{@link k3j.io.SafetensorsFile}: one file's untrusted header, parsed with Jackson's streaming parser
 *       and checked before any number sizes anything (length ≥ 8; header length 2..100 MiB and inside the
 *       file; a UTF-8 JSON object with nothing after it; entries with exactly dtype, shape, data_offsets —
 *       unknown keys are REFUSED; shape products via {@code Math.multiplyExact}; offsets inside the data
 *       section; no two non-empty tensors sharing a byte; {@code __metadata__} string → string). Names are
 *       decoded exactly (unicode kept). Bytes after the last tensor are allowed and reported.</li>
 *   <li>{@link k3j.io.CheckpointIndex}: name → {@link k3j.io.TensorInfo} over a directory's shards, numbered
 *       in byte-wise file name order; with {@code model.safetensors.index.json} the index and the headers must
 *       agree exactly (one {@code partial-download} error otherwise). Names are unique across shards.</li>
 *   <li>{@link k3j.io.TensorReader}: bytes into {@link java.lang.foreign.MemorySegment}s by positional read,
 *       mmap or O_DIRECT (aligned windows; falls back with one note where refused).
 *       {@link k3j.io.Widen}: BF16, F16, F32, U8 → float32, exactly (NaN payloads kept).</li>
 *   <li>{@link k3j.io.DType}: the safetensors byte-sized dtypes; only BF16, F16, F32 and U8 widen.</li>
 * </ul>
 * Every refusal is a {@link k3j.io.CheckpointException} naming file, tensor and rule.
 */
package k3j.io;
