/**
 * The test kit: checkpoints written for tests and benchmarks, shipped to the conformance module as the
 * engine's test-jar (a separate module would need the engine while the engine's own tests need the kit: a
 * cycle Maven refuses).
 * <ul>
 *   <li>{@link k3j.testkit.SafetensorsWriter}: the one safetensors writer, well-formed or deliberately not.</li>
 *   <li>{@link k3j.testkit.ReleasedLayout}: the released K3's 497,052-tensor layout as sparse shards, for
 *       proving the reader and the binder without the weights.</li>
 *   <li>{@link k3j.testkit.MarkedCheckpoint}: a small checkpoint of marker bytes in the released naming, for
 *       the trunk gate and benchmarks.</li>
 * </ul>
 */
package k3j.testkit;
