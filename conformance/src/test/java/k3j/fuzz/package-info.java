/**
 * The fuzz targets: {@link k3j.fuzz.FuzzTargets} feeds untrusted bytes to each reader of files a user gives
 * (safetensors headers, config, index, reference dump, trunk manifest, the command line), {@link k3j.fuzz.Limits}
 * bounds each input's time and allocation. FuzzGate replays their corpora; {@code ci/fuzz} fuzzes them.
 */
package k3j.fuzz;
