package k3j.io;

/**
 * The element types a safetensors header may name: the byte-sized dtypes of the safetensors format.
 * Any other dtype string (including a lower-case spelling, or the sub-byte F4/F6 types) is refused.
 * Only BF16, F16, F32 and U8 widen to float; the others can be read as raw bytes but not widened,
 * because no Kimi K3 tensor uses them and a silent widening rule would be a guess.
 */
public enum DType {
    BOOL(1, false),
    U8(1, true),
    I8(1, false),
    F8_E4M3(1, false),
    F8_E5M2(1, false),
    I16(2, false),
    U16(2, false),
    F16(2, true),
    BF16(2, true),
    I32(4, false),
    U32(4, false),
    F32(4, true),
    F64(8, false),
    I64(8, false),
    U64(8, false);

    private final int size;
    private final boolean widenable;

    DType(int size, boolean widenable) {
        this.size = size;
        this.widenable = widenable;
    }

    /** Bytes per element. */
    public int size() {
        return size;
    }

    /** Whether {@link Widen#toFloats} converts this dtype to float32. */
    public boolean widenable() {
        return widenable;
    }

    /** The dtype spelled exactly (case-sensitive) as in a safetensors header, or null when unknown. */
    public static DType parse(String name) {
        return switch (name) {
            case "BOOL" -> BOOL;
            case "U8" -> U8;
            case "I8" -> I8;
            case "F8_E4M3" -> F8_E4M3;
            case "F8_E5M2" -> F8_E5M2;
            case "I16" -> I16;
            case "U16" -> U16;
            case "F16" -> F16;
            case "BF16" -> BF16;
            case "I32" -> I32;
            case "U32" -> U32;
            case "F32" -> F32;
            case "F64" -> F64;
            case "I64" -> I64;
            case "U64" -> U64;
            default -> null;
        };
    }
}
