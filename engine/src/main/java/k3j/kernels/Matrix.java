package k3j.kernels;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;

/**
 * A dense weight matrix [rows][cols], row-major, little-endian, as the checkpoint stores it. The data is a
 * {@link MemorySegment} so an mmapped checkpoint is used in place; a heap segment must be byte[]-backed
 * (the Vector API loads only from those).
 */
public record Matrix(MemorySegment data, WeightType type, int rows, int cols) {
    static final ValueLayout.OfShort BF16 = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    public Matrix {
        if (rows <= 0 || cols <= 0) throw new IllegalArgumentException("matrix shape [" + rows + ", " + cols + "] must be positive");
        long need = (long) rows * cols * type.bytes;
        if (data.byteSize() != need) {
            throw new IllegalArgumentException(type + " matrix [" + rows + ", " + cols + "] needs " + need + " bytes, segment has " + data.byteSize());
        }
    }

    /** Element (r, c) widened to float: exact for both storage types. */
    public float get(int r, int c) {
        long i = (long) r * cols + c;
        return type == WeightType.BF16 ? Fp.bf16(data.getAtIndex(BF16, i)) : data.getAtIndex(F32, i);
    }

    /** Row r widened into dst[off .. off+cols). */
    public void row(int r, float[] dst, int off) {
        for (int c = 0; c < cols; c++) dst[off + c] = get(r, c);
    }

    /** A bf16 matrix over a copy of the given bit patterns (tests, fixtures). */
    public static Matrix bf16(short[] bits, int rows, int cols) {
        MemorySegment seg = MemorySegment.ofArray(new byte[bits.length * 2]);
        for (int i = 0; i < bits.length; i++) seg.setAtIndex(BF16, i, bits[i]);
        return new Matrix(seg, WeightType.BF16, rows, cols);
    }

    /** A float32 matrix over a copy of the given values (tests, fixtures). */
    public static Matrix f32(float[] values, int rows, int cols) {
        MemorySegment seg = MemorySegment.ofArray(new byte[values.length * 4]);
        for (int i = 0; i < values.length; i++) seg.setAtIndex(F32, i, values[i]);
        return new Matrix(seg, WeightType.F32, rows, cols);
    }

    /** An off-heap matrix of the given type in {@code arena}, zero-filled (benchmarks, multi-GB shapes). */
    public static Matrix allocate(Arena arena, WeightType type, int rows, int cols) {
        return new Matrix(arena.allocate((long) rows * cols * type.bytes, 64), type, rows, cols);
    }
}
