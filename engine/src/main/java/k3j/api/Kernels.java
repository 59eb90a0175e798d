package k3j.api;

import k3j.kernels.KernelPath;

/** Which kernel path the matrix products take. Every path gives the same bits (docs/fp-contract.md); only speed differs. */
public enum Kernels {
    /** Always the Vector API path. */
    VECTOR,
    /** Always the scalar path. */
    SCALAR,
    /** The Vector API for large products, the scalar path for small ones (the default). */
    ADAPTIVE;

    KernelPath.Mode mode() {
        return KernelPath.Mode.valueOf(name());
    }
}
