package k3j.kernels;

/**
 * The scalar building blocks of docs/fp-contract.md: transcendentals, sigmoid, bf16 widening.
 *
 * <p>Transcendentals go through {@link StrictMath} (fdlibm semantics, the same bits on every JVM, in the
 * interpreter and after JIT, on every CPU). {@code Math.exp} is an intrinsic whose last bit is allowed to
 * differ between the interpreter, C1, C2 and CPUs, so it is NEVER used by a kernel.
 */
public final class Fp {
    private Fp() {}

    /** expf: the double fdlibm exp of the widened float, rounded once to float. */
    public static float exp(float x) {
        return (float) StrictMath.exp(x);
    }

    /** tanhf: the double fdlibm tanh of the widened float, rounded once to float. */
    public static float tanh(float x) {
        return (float) StrictMath.tanh(x);
    }

    /** sigmoid in float: 1 / (1 + exp(-x)), three float roundings in that order. */
    public static float sigmoid(float x) {
        return 1.0f / (1.0f + exp(-x));
    }

    /** bf16 bit pattern (low 16 bits of {@code bits}) to float: exact, the bits go to the top half. */
    public static float bf16(int bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /** float to bf16 bits, round to nearest even (for tests and fixtures; the engine never narrows). */
    public static short toBf16(float f) {
        int b = Float.floatToRawIntBits(f);
        if (Float.isNaN(f)) return (short) ((b >>> 16) | 0x40);
        b += 0x7FFF + ((b >>> 16) & 1);
        return (short) (b >>> 16);
    }
}
