package k3j.kernels;

/** How a dense weight matrix is stored: checkpoint bf16 (widened exactly on use) or float32. */
public enum WeightType {
    BF16(2),
    F32(4);

    /** Bytes per element. */
    public final int bytes;

    WeightType(int bytes) {
        this.bytes = bytes;
    }
}
