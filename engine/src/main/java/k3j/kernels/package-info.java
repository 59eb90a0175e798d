/**
 * Every numeric kernel, under one floating-point contract (docs/fp-contract.md): norms, dense and MXFP4
 * products, router, SiTU-GLU, ShortConv, KDA, MLA attention, AttnRes, argmax. Each has a scalar reference path
 * and, where the arithmetic allows, a Vector API fast path with the same bits; {@link k3j.kernels.Workers}
 * splits independent outputs over threads without changing bits.
 *
 * <p>A Vector API path is fast only where C2 has compiled it with every vector operation inlined; anywhere else
 * each operation is an allocating Java call (boxed vectors, gigabytes of garbage). Two rules keep the kernels
 * there (docs/fp-contract.md §4; VectorBoundaryTest checks the first from the class files): no vector is ever
 * a parameter, a return value or a field (a helper C2 declines to inline, e.g. past its node-count cut-off,
 * boxes every vector it is handed); and each vector loop sits in a method called once per row, row pair or
 * block, never once per matrix, so it is invoked thousands of times per call and C2 compiles it whole early,
 * instead of every call entering it in C1 code and waiting for on-stack replacement.
 */
package k3j.kernels;
