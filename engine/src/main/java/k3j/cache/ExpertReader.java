package k3j.cache;

import java.io.IOException;
import java.lang.foreign.MemorySegment;

/**
 * Fills a cache slot with one expert's bytes. Reads of different experts may run concurrently.
 * A short or failed read throws; the cache then leaves the slot EMPTY and serves nothing.
 */
public interface ExpertReader extends AutoCloseable {
    /**
     * Reads {@code location} into {@code slot} (a whole slot: 4096-aligned, {@link
     * CacheGeometry#slotBytes} long) and returns {@code pad}, where the payload starts inside it.
     */
    long read(ExpertLocation location, MemorySegment slot) throws IOException;

    @Override
    default void close() throws IOException {}
}
