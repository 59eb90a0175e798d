package k3j.io;

import java.nio.file.Path;
import java.util.Arrays;

/**
 * One tensor of a checkpoint, as its validated header describes it.
 *
 * @param name   the tensor's name, decoded exactly from the header JSON (unicode kept)
 * @param shard  the shard's number in the checkpoint (byte-wise sorted file names, from 0)
 * @param file   the shard file that holds the bytes
 * @param dtype  the element type
 * @param shape  the dimensions, outermost first; empty for a rank-0 scalar (one element)
 * @param offset the absolute byte offset of the first element in {@code file}
 * @param length the byte length: elements × dtype size
 */
public record TensorInfo(String name, int shard, Path file, DType dtype, long[] shape, long offset, long length) {

    /** The number of elements (1 for a rank-0 scalar); validated not to overflow when the header was read. */
    public long elementCount() {
        return length / dtype.size();
    }

    public int rank() {
        return shape.length;
    }

    /** The shape as {@code [a, b]}. */
    public String shapeString() {
        return Arrays.toString(shape);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TensorInfo t && name.equals(t.name) && shard == t.shard && file.equals(t.file)
                && dtype == t.dtype && Arrays.equals(shape, t.shape) && offset == t.offset && length == t.length;
    }

    @Override
    public int hashCode() {
        return name.hashCode() * 31 + Long.hashCode(offset);
    }

    @Override
    public String toString() {
        return CheckpointException.quote(name) + " " + dtype + shapeString() + " in " + file.getFileName()
                + " @" + offset + "+" + length;
    }
}
