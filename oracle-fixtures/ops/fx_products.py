"""Dense bf16/f32 and MXFP4 products (docs/semantics.md §3.3-3.5)."""
import engine_model as em
import numpy as np
import os
import sys
from kit import ROOT, F32, Fixture, fixture, normal, rng_for


# --- matvec ----------------------------------------------------------------------------------------------

def matvec_fixture(name, n_in, n_out, wdtype, T=2):
    fx = Fixture(name, "matvec", {"in": n_in, "out": n_out},
                 pitfall="docs/semantics.md §3.3, §11 #26 (16-lane blocks with a ragged tail); docs/fp-contract.md v2 (float FMA)")
    r = rng_for(name)
    w = normal(r, n_out, n_in, scale=0.5)
    x = normal(r, T, n_in)
    # v1's cancelling pairs of ~2^14 products (they proved a DOUBLE accumulator) are gone: under fp-contract v2 the
    # accumulator is float by contract, and the order of its additions is gated bit for bit by KernelBitIdentityGate.
    if n_in % 16:
        x[:, n_in - 1] = 40.0 * np.where(np.arange(T) % 2, 1.0, -1.0)     # the ragged tail carries signal
    wv = fx.add("w", wdtype, w)
    xv = fx.add("x", "f32", x)
    fx.run = lambda A, mut=(): {"y": em.matvec(wv, xv, A, mut)}
    if n_in % 16:
        fx.mutant("drop_ragged_tail", "tail (in mod 16) dropped")
    return fx


@fixture
def matvec_bf16_odd():
    return matvec_fixture("matvec_bf16_odd", 257, 129, "bf16")


@fixture
def matvec_f32_weights():
    return matvec_fixture("matvec_f32_weights", 161, 67, "f32")


# --- mxfp4 -----------------------------------------------------------------------------------------------

def pack_codes(codes):
    codes = np.asarray(codes, np.uint8)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


@fixture
def mxfp4_dequant_all_codes():
    rows, n_in = 8, 96
    fx = Fixture("mxfp4_dequant_all_codes", "mxfp4_dequant", {"rows": rows, "in": n_in},
                 pitfall="docs/semantics.md §3.4, §11 #8, §12.4 (low nibble = even element; E8M0 255 -> group of zeros)")
    r = rng_for(fx.name)
    codes = np.zeros((rows, n_in), np.int64)
    for row in range(rows):
        # every (even code, odd code) ordered pair appears somewhere across the rows; every code at both parities
        a = r.permutation(16)
        b = (a + 1 + row) % 16
        line = np.empty(n_in, np.int64)
        line[0::2] = np.tile(a, n_in // 32)
        line[1::2] = np.tile(b, n_in // 32)
        codes[row] = line
    codes[0, 0], codes[0, 1] = 8, 0          # negative zero next to zero
    scales = np.array([[127, 0, 1], [100, 126, 128], [255, 127, 140], [250, 118, 122],
                       [112, 255, 200], [3, 64, 127], [121, 119, 255], [254 - 4, 130, 5]], np.uint8)
    fx.add("packed", "u8", pack_codes(codes))
    fx.add("scales", "u8", scales)
    v = fx.values
    fx.run = lambda A, mut=(): {"w": em.mxfp4_dequant(v["packed"], v["scales"], n_in, mut)}
    fx.exact.add("w")
    fx.mutant("swap_nibbles", "high nibble = even element")
    fx.mutant("scale_bias_128", "E8M0 bias 128")
    fx.mutant("scale_255_nan", "E8M0 255 as NaN (OCP spec) instead of a zeroed group")
    fx.mutant("scale_255_as_exponent", "E8M0 255 as 2^128 (overflows to Inf)")
    fx.extra["e8m0_255"] = "zero: a scale byte of 255 dequantises its whole group of 32 to (signed) zeros"
    want = em.mxfp4_dequant(v["packed"], v["scales"], n_in)
    swapped = em.mxfp4_dequant(v["packed"], v["scales"], n_in, ("swap_nibbles",))
    nd = int(np.sum(swapped != want))
    fx.extra["swapped_nibbles_differ"] = nd
    fx.notes.append("scale bytes include 0 (2^-127, subnormal), 1, 3, 5, 64, 100..140, 200, 250 and 255 (three "
                    "groups: they dequantise to all zeros, signed zeros allowed: compare with ==); max scale 250 so "
                    "nothing overflows; every code at even and odd positions; code 8 (-0.0) at [0][0]; "
                    "nibble-swapped dequant differs in %d of %d elements" % (nd, rows * n_in))
    return fx


@fixture
def mxfp4_dequant_quantized_gaussian():
    rows, n_in = 8, 512
    fx = Fixture("mxfp4_dequant_quantized_gaussian", "mxfp4_dequant", {"rows": rows, "in": n_in},
                 pitfall="docs/semantics.md §3.4, §11 #8 (checkpoint-like bytes: scale bytes near 112-122)")
    import torch
    sys.path.insert(0, os.path.join(ROOT, "reference-dumps", "torch"))
    from k3ref import ops as kops
    r = rng_for(fx.name)
    w = normal(r, rows, n_in, scale=0.02) * r.uniform(0.3, 3.0, (rows, 1))
    packed, scales = kops.mxfp4_quantize(torch.from_numpy(w))
    fx.add("packed", "u8", packed.numpy())
    fx.add("scales", "u8", scales.numpy())
    v = fx.values
    fx.run = lambda A, mut=(): {"w": em.mxfp4_dequant(v["packed"], v["scales"], n_in, mut)}
    fx.exact.add("w")
    fx.mutant("swap_nibbles", "high nibble = even element")
    fx.mutant("scale_bias_128", "E8M0 bias 128")
    fx.extra["e8m0_255"] = "zero: a scale byte of 255 dequantises its whole group of 32 to (signed) zeros"
    want = em.mxfp4_dequant(v["packed"], v["scales"], n_in)
    nd = int(np.sum(em.mxfp4_dequant(v["packed"], v["scales"], n_in, ("swap_nibbles",)) != want))
    fx.extra["swapped_nibbles_differ"] = nd
    fx.notes.append("bytes written by k3ref.ops.mxfp4_quantize from gaussian rows (std 0.006..0.06): scale bytes "
                    "%d..%d like the released checkpoint; nibble-swapped dequant differs in %d of %d elements"
                    % (int(v["scales"].min()), int(v["scales"].max()), nd, rows * n_in))
    return fx


@fixture
def mxfp4_matvec_odd_rows():
    rows, n_in, T = 37, 96, 3
    fx = Fixture("mxfp4_matvec_odd_rows", "mxfp4_matvec", {"rows": rows, "in": n_in},
                 pitfall="docs/semantics.md §3.5 (groups of 32, scale per group and row, 255 group contributes nothing)")
    r = rng_for(fx.name)
    codes = r.integers(0, 16, (rows, n_in))
    scales = r.integers(116, 129, (rows, n_in // 32))
    scales[3, 1] = 255
    scales[17, 0] = 255
    scales[36, 2] = 255
    fx.add("packed", "u8", pack_codes(codes))
    fx.add("scales", "u8", scales)
    fx.add("x", "f32", normal(r, T, n_in))
    v = fx.values
    fx.run = lambda A, mut=(): {"y": em.mxfp4_matvec(v["packed"], v["scales"], n_in, v["x"], A, mut)}
    fx.mutant("swap_nibbles", "high nibble = even element")
    fx.mutant("scale_bias_128", "E8M0 bias 128")
    fx.mutant("scale_255_as_exponent", "byte 255 taken as 2^128 instead of zeroing the group")
    fx.mutant("scale_255_nan", "byte 255 as NaN (OCP spec)")
    fx.extra["e8m0_255"] = "zero: groups with scale byte 255 contribute nothing"
    fx.notes.append("rows 3, 17, 36 each have one scale-255 group")
    return fx
