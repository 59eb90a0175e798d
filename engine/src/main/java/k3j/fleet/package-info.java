/**
 * Conformance over many machines: which shard this process is ({@link k3j.fleet.ShardId}, from {@code --shard I/N} or a
 * scheduler's array index), which layers it judges ({@link k3j.fleet.WorkPlan}, balanced by bytes read and tokens run),
 * the folder each shard writes ({@link k3j.fleet.ShardFolder}: plan, results, completion marker last) and the one merge
 * of those folders ({@link k3j.fleet.Merge}), never green while a shard is missing, duplicated, unfinished or foreign
 * (docs/formats.md §18).
 */
package k3j.fleet;
