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

    /**
     * Rows r0 .. r0+n widened into dst[0 .. n·cols) by one bulk copy (bf16 through {@code scratch}, at least n·cols
     * long): what the scalar paths read, as a MemorySegment access per element is a deep call chain until C2 has
     * compiled it (the oracle-sized runs, on C1 alone, never do).
     */
    void rows(int r0, int n, float[] dst, short[] scratch) {
        int count = n * cols;
        if (type == WeightType.BF16) {
            MemorySegment.copy(data, BF16, 2L * cols * r0, scratch, 0, count);
            for (int i = 0; i < count; i++) dst[i] = Fp.bf16(scratch[i]);
        } else {
            MemorySegment.copy(data, F32, 4L * cols * r0, dst, 0, count);
        }
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
