package k3j.cache;

import java.lang.foreign.MemorySegment;

/**
 * One expert's bytes in a cache slot, in {@code form}. Valid until the slot is evicted: the cache never evicts
 * the last {@code protectedSlots()} handed-out slots, so the forward must finish with an expert before it asks
 * for that many others.
 */
public record ResidentExpert(int layer, int expert, MemorySegment bytes, ExpertLocation location, ExpertForm form) {
    /** The bytes as stored in the checkpoint. */
    public ResidentExpert(int layer, int expert, MemorySegment bytes, ExpertLocation location) {
        this(layer, expert, bytes, location, ExpertForm.STORED);
    }

    /** One of the six tensors as stored, sliced out of the payload at its offset from the header. */
    public MemorySegment part(ExpertPart part) {
        if (form != ExpertForm.STORED) throw new IllegalStateException("the expert is held in the " + form + " form, not as stored");
        return bytes.asSlice(location.partOffset(part), location.partLength(part));
    }
}
