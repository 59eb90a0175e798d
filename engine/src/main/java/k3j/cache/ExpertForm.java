package k3j.cache;

import java.lang.foreign.MemorySegment;

/**
 * What a cache slot holds for an expert: the bytes as stored in the checkpoint ({@link #STORED}), or a
 * kernel-ready form that the cache makes ONCE, when it fills the slot, so that a hit costs no conversion
 * (docs/semantics.md §6.1).
 */
public interface ExpertForm {
    /** The payload as read: each part at {@link ExpertLocation#partOffset}. */
    ExpertForm STORED = new ExpertForm() {
        @Override
        public long bytes(ExpertLocation loc) {
            return loc.length();
        }

        @Override
        public void fill(ExpertLocation loc, MemorySegment stored, MemorySegment dst) {
            MemorySegment.copy(stored, 0, dst, 0, loc.length());
        }

        @Override
        public String toString() {
            return "stored";
        }
    };

    /** Bytes the form of the expert at {@code loc} takes in a slot. */
    long bytes(ExpertLocation loc);

    /**
     * Writes the form of {@code stored} (the payload as read, parts at {@code loc}'s offsets) into {@code dst}
     * ({@link #bytes} long).
     *
     * @throws IllegalArgumentException when the stored bytes do not fit the form's geometry
     */
    void fill(ExpertLocation loc, MemorySegment stored, MemorySegment dst);
}
