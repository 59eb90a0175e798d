package k3j.cache;

import java.nio.file.Path;
import java.util.List;

/**
 * Where one routed expert lives on disk: its file and the byte extents of its six tensors, in
 * {@link ExpertPart} order, straight from the safetensors header (the order of the six inside the
 * shard is not assumed). Contiguity per docs/semantics.md §2.6: lo = min offset, hi = max end; contiguous
 * iff hi − lo equals the sum of the six lengths. A contiguous expert is ONE read of [lo, hi) and
 * each part sits at (its offset − lo); otherwise the slot holds the canonical layout
 * w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale, filled by six reads.
 */
public record ExpertLocation(Path file, List<Extent> parts) {

    /** One tensor's bytes in the file: [offset, offset + length). */
    public record Extent(long offset, long length) {
        public Extent {
            if (offset < 0 || length <= 0) {
                throw new IllegalArgumentException("bad tensor extent: offset " + offset + ", length " + length);
            }
        }

        public long end() {
            return offset + length;
        }
    }

    public ExpertLocation {
        if (parts.size() != ExpertPart.COUNT) {
            throw new IllegalArgumentException("an expert has " + ExpertPart.COUNT + " tensors, got " + parts.size() + " for " + file);
        }
        parts = List.copyOf(parts);
    }

    /** One contiguous run at {@code offset}; {@code partOffsets[i]} is part i's position inside it. */
    public static ExpertLocation contiguous(Path file, long offset, long[] partOffsets, long[] partLengths) {
        if (partOffsets.length != ExpertPart.COUNT || partLengths.length != ExpertPart.COUNT) {
            throw new IllegalArgumentException("an expert has " + ExpertPart.COUNT + " tensors");
        }
        Extent[] e = new Extent[ExpertPart.COUNT];
        for (int i = 0; i < e.length; i++) e[i] = new Extent(offset + partOffsets[i], partLengths[i]);
        ExpertLocation loc = new ExpertLocation(file, List.of(e));
        if (!loc.contiguous()) throw new IllegalArgumentException("the six parts do not tile one run in " + file);
        return loc;
    }

    /** First byte of the run (contiguous) or of the lowest tensor. */
    public long offset() {
        return parts.stream().mapToLong(Extent::offset).min().orElseThrow();
    }

    private long end() {
        return parts.stream().mapToLong(Extent::end).max().orElseThrow();
    }

    private long sum() {
        return parts.stream().mapToLong(Extent::length).sum();
    }

    public boolean contiguous() {
        return end() - offset() == sum();
    }

    /** The expert's payload size in the slot (the sum of the six parts). */
    public long length() {
        return sum();
    }

    /** Where {@code part} starts inside the payload. */
    public long partOffset(ExpertPart part) {
        if (contiguous()) return parts.get(part.ordinal()).offset() - offset();
        long at = 0;
        for (int i = 0; i < part.ordinal(); i++) at += parts.get(i).length();
        return at;
    }

    public long partLength(ExpertPart part) {
        return parts.get(part.ordinal()).length();
    }
}
