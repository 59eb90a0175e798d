package k3j.cache;

import java.lang.foreign.MemorySegment;

/**
 * One expert's bytes in a cache slot. Valid until the slot is evicted: the cache never evicts the
 * last {@code protectedSlots()} handed-out slots, so the forward must finish with an expert before
 * it asks for that many others.
 */
public record ResidentExpert(int layer, int expert, MemorySegment bytes, ExpertLocation location) {
    /** One of the six tensors, sliced out of the payload at its offset from the header. */
    public MemorySegment part(ExpertPart part) {
        return bytes.asSlice(location.partOffset(part), location.partLength(part));
    }
}
