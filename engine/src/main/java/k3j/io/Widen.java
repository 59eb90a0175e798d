package k3j.io;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import k3j.io.CheckpointException.Rule;

/**
 * Tensor bytes to float32, exactly: every BF16, F16 and U8 value is representable in float32, so no
 * rounding happens and NaN payloads, infinities, signed zeros and subnormals keep their bits.
 */
public final class Widen {
    private static final ValueLayout.OfShort HALF = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    /** The largest float[] the VM reliably allocates. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private Widen() {}

    /** The tensor's bytes (exactly {@code t.length()} of them) widened to float32. */
    public static float[] toFloats(TensorInfo t, MemorySegment bytes) {
        if (!t.dtype().widenable()) {
            throw new CheckpointException(Rule.NOT_WIDENABLE, t.file(), t.name(),
                    t.dtype() + " does not widen to float (only BF16, F16, F32, U8)");
        }
        if (bytes.byteSize() != t.length()) {
            throw new IllegalArgumentException("segment holds " + bytes.byteSize() + " bytes, tensor "
                    + CheckpointException.quote(t.name()) + " has " + t.length());
        }
        long count = t.elementCount();
        if (count > MAX_ARRAY) {
            throw new CheckpointException(Rule.NOT_WIDENABLE, t.file(), t.name(),
                    count + " elements do not fit one float array");
        }
        float[] out = new float[(int) count];
        switch (t.dtype()) {
            case F32 -> MemorySegment.copy(bytes, FLOAT, 0, out, 0, out.length);
            case BF16, F16 -> {
                // bulk copies through a small buffer: an access per element is a deep call chain until C2 compiles it
                boolean bf = t.dtype() == DType.BF16;
                short[] h = new short[Math.min(out.length, 8192)];
                for (int i0 = 0; i0 < out.length; i0 += h.length) {
                    int n = Math.min(h.length, out.length - i0);
                    MemorySegment.copy(bytes, HALF, 2L * i0, h, 0, n);
                    for (int i = 0; i < n; i++) out[i0 + i] = bf ? bf16(h[i]) : f16(h[i]);
                }
            }
            case U8 -> {
                for (int i = 0; i < out.length; i++) out[i] = bytes.get(ValueLayout.JAVA_BYTE, i) & 0xff;
            }
            default -> throw new AssertionError(t.dtype());
        }
        return out;
    }

    /** bfloat16 is the top half of a float32: shift, nothing else. */
    public static float bf16(short h) {
        return Float.intBitsToFloat((h & 0xffff) << 16);
    }

    /**
     * IEEE binary16 to float32 by bits. Not {@code Float.float16ToFloat}: its x86 intrinsic (vcvtph2ps)
     * quiets signalling NaNs, which would change a NaN payload's bits.
     */
    public static float f16(short h) {
        int bits = h & 0xffff;
        int sign = (bits & 0x8000) << 16;
        int exp = (bits >>> 10) & 0x1f;
        int mant = bits & 0x3ff;
        if (exp == 0x1f) return Float.intBitsToFloat(sign | 0x7f80_0000 | (mant << 13));
        if (exp == 0) {
            // zero or subnormal: mant · 2^-24, exact in float32 (keeps the sign of zero)
            float v = mant * 0x1p-24f;
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }
}
