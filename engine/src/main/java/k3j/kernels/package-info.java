/**
 * Every numeric kernel, under one floating-point contract (docs/fp-contract.md): norms, dense and MXFP4
 * products, router, SiTU-GLU, ShortConv, KDA, MLA attention, AttnRes, argmax. Each has a scalar reference path
 * and, where the arithmetic allows, a Vector API fast path with the same bits; {@link k3j.kernels.Workers}
 * splits independent outputs over threads without changing bits.
 */
package k3j.kernels;
