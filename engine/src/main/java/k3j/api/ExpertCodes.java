package k3j.api;

import k3j.kernels.Mxfp4;

/** How the routed experts' MXFP4 codes are held in memory for the kernels. Both forms give the same bits. */
public enum ExpertCodes {
    /** Packed two codes a byte, as in the checkpoint: half the memory of {@link #INT8}. */
    NIBBLES,
    /** One code a byte: twice the memory, fewer instructions per product. */
    INT8;

    Mxfp4.Codes codes() {
        return Mxfp4.Codes.valueOf(name());
    }
}
