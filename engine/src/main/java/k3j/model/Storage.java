package k3j.model;

/** How the binder keeps a tensor (docs/semantics.md §2.5 "N"/"W", routed experts apart). */
public enum Storage {
    /** A dense matrix multiplied in place: BF16 stays BF16, F32 stays F32, F16 is widened to F32; anything else refused. */
    MATRIX,
    /** A vector the kernels read elementwise (norm gains, conv taps, biases): widened to float at load (BF16, F16, F32). */
    VECTOR,
    /** An MXFP4 expert part: U8 bytes, never bound to RAM by the binder (the expert source reads them). */
    EXPERT_BYTES
}
