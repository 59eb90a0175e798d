/**
 * The routed-expert cache (docs/semantics.md §6): {@link k3j.cache.ExpertCache}, a fixed arena of 4096-aligned
 * slots over a {@link k3j.cache.ExpertLocator}, with {@link k3j.cache.SlotTable} (EMPTY / INFLIGHT / key),
 * the window-LFU, S3-FIFO and LRU {@link k3j.cache.ReplacementPolicy replacement policies}, batch prefetch and speculation;
 * {@link k3j.cache.CacheStats} and {@link k3j.cache.CacheTrace} for the reports and {@code --dump-cache-trace};
 * {@link k3j.cache.CacheSimulator} replays a trace for {@code k3 sim-cache} (§9). A failed read is counted and
 * never served ({@link k3j.cache.ExpertLoadException}).
 */
package k3j.cache;
