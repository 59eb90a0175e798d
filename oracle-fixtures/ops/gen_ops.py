#!/usr/bin/python3
"""Kernel fixtures for the Java kernel gate (format: oracle-fixtures/ops/README.md, "k3j-ops/1").

    /usr/bin/python3 oracle-fixtures/ops/gen_ops.py            regenerate oracle-fixtures/ops/ in place
    /usr/bin/python3 oracle-fixtures/ops/gen_ops.py --check    regenerate into a temp dir and compare with the
                                                               committed files (inputs byte for byte, float
                                                               outputs within 1e-12 relative); exit 1 on any difference

Each fixture is ADVERSARIAL: inputs are chosen so that named plausible wrong implementations (mutants) fail.
For every fixture the generator
  1. builds the inputs deterministically (numpy PCG64 seeded by SEED and the fixture name),
  2. takes the expected outputs from the float64 torch reference (reference-dumps/torch/k3ref/ops.py),
  3. cross-checks them against its own float64 model (engine_model.py) -- two independent implementations,
  4. runs the fp32 engine model (float activations, double accumulators where docs/fp-contract.md says so) and sets the
     tolerance to the smallest ladder value c (atol = c*rms(want), rtol = c, c >= 1e-6) that the fp32 model
     passes with a safety factor >= 10,
  5. measures each mutant's worst ratio under that tolerance and REFUSES to write the fixture if a mutant
     listed as defeated fails by less than 10x.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import engine_model as em  # noqa: E402

F32, F64 = np.float32, np.float64
SEED = 20261129
FORMAT = "k3j-ops/1"
SAFETY = 10.0          # fp32 engine model must use <= 1/SAFETY of the tolerance
MIN_DEFEAT = 10.0      # every listed mutant must fail by >= this factor
LADDER = [float("%de%d" % (m, e)) for e in range(-6, -1) for m in (1, 2, 5)]

# Tiny-k3 geometry (oracle-fixtures/tiny-k3/config.json), used where a kernel has a model dimension.
TINY = dict(E=128, kda_heads=3, kda_dim=20, conv=4, lb=-5.0, rms_eps=1e-5, mla_heads=5, q_lora=52, kv_lora=36,
            qk_nope=16, qk_rope=8, v_head=14, experts=12, top_k=3, latent=64, moe_inter=96, shared=2,
            scaling=2.5, dense_inter=160, beta=4.0, linear_beta=25.0, block=5)


# ----------------------------------------------------------------------------------------------- numbers

def bf16_bits(a):
    """float -> bf16 bit patterns, round to nearest even (via float32)."""
    u = np.asarray(a, F32).view(np.uint32).astype(np.uint64)
    r = ((u >> 16) & 1) + 0x7FFF
    return ((u + r) >> 16).astype(np.uint16)


def bf16_value(bits):
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(F32)


def rng_for(name):
    return np.random.default_rng(np.random.SeedSequence([SEED, zlib.crc32(name.encode())]))


def worst_ratio(got, want, atol, rtol):
    got = np.asarray(got, F64)
    want = np.asarray(want, F64)
    if got.shape != want.shape:
        return float("inf")
    d = np.abs(got - want)
    r = d / (atol + rtol * np.abs(want))
    if np.any(~np.isfinite(got)):
        return float("inf")
    return float(np.max(r)) if r.size else 0.0


# ----------------------------------------------------------------------------------------------- fixtures

class Fixture:
    def __init__(self, name, kernel, params, level="kernel", pitfall=None):
        self.name, self.kernel, self.level, self.params, self.pitfall = name, kernel, level, params, pitfall
        self.inputs = {}          # name -> (dtype, raw array as stored)
        self.values = {}          # name -> float values the engine sees (f32 for f32/bf16, u8 stays u8)
        self.run = None           # run(A, mut) -> dict of outputs (engine model)
        self.mutants = []         # (mutant name, mut tuple, A, what it models)
        self.exact = set()        # outputs compared exactly
        self.notes = []           # extra adversarial facts (measured)
        self.extra = {}           # extra manifest fields

    def add(self, name, dtype, arr):
        if dtype == "bf16":
            raw = bf16_bits(arr)
            val = bf16_value(raw)
        elif dtype == "f32":
            raw = np.asarray(arr, F32)
            val = raw
        elif dtype == "u8":
            raw = np.asarray(arr, np.uint8)
            val = raw
        elif dtype == "i32":
            raw = np.asarray(arr, np.int32)
            val = raw
        else:
            raise ValueError(dtype)
        self.inputs[name] = (dtype, raw)
        self.values[name] = val
        return val

    def mutant(self, name, what, A=F64, mut=None):
        self.mutants.append((name, tuple(mut) if mut else (name,), A, what))


REGISTRY = []


def fixture(fn):
    REGISTRY.append(fn)
    return fn


def normal(rng, *shape, scale=1.0):
    return rng.standard_normal(shape) * scale


# --- rmsnorm ---------------------------------------------------------------------------------------------

def rms_common(fx):
    p = fx.params
    x, w = fx.values["x"], fx.values["w"]
    fx.run = lambda A, mut=(): {"y": em.rmsnorm(x, w, p["eps"], A, mut)}
    fx.mutant("eps_outside_sqrt", "1/(sqrt(mean)+eps)")
    fx.mutant("no_eps", "eps dropped")
    fx.mutant("sum_not_mean", "sum of squares instead of the mean")
    fx.mutant("no_gain", "gain ignored")


@fixture
def rmsnorm_odd_width():
    n = 257
    fx = Fixture("rmsnorm_odd_width", "rmsnorm", {"n": n, "eps": 1e-5}, pitfall="docs/semantics.md §3.1 (eps inside sqrt, mean not sum)")
    r = rng_for(fx.name)
    rows = [normal(r, n), normal(r, n, scale=30.0) + 5.0, normal(r, n, scale=1e-3), normal(r, n, scale=3e-3),
            np.concatenate([normal(r, 8, scale=200.0), normal(r, n - 8, scale=0.01)]), normal(r, n, scale=0.05)]
    fx.add("x", "f32", np.stack(rows))
    fx.add("w", "bf16", r.uniform(0.25, 2.0, n) * np.where(r.random(n) < 0.1, -1.0, 1.0))
    rms_common(fx)
    fx.notes.append("rows 2 and 3 have mean(x^2) ~ 1e-6 and ~ 1e-5, so eps = 1e-5 dominates / matters")
    return fx


@fixture
def rmsnorm_f32_gain():
    n = 96
    fx = Fixture("rmsnorm_f32_gain", "rmsnorm", {"n": n, "eps": 1e-5}, pitfall="docs/semantics.md §3.1, §12.5 (dtype from the header)")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=2e-3), normal(r, n, scale=7.0)]))
    fx.add("w", "f32", r.uniform(-1.5, 1.5, n))
    rms_common(fx)
    return fx


# --- l2norm ----------------------------------------------------------------------------------------------

def l2_common(fx):
    x = fx.values["x"]
    fx.run = lambda A, mut=(): {"y": em.l2norm(x, fx.params["eps"], A, mut)}
    fx.mutant("mean_not_sum", "mean of squares instead of the sum")
    fx.mutant("max_norm_eps", "x / max(||x||, eps) (F.normalize style)")
    fx.mutant("eps_outside_sqrt", "x / (||x|| + eps)")


@fixture
def l2norm_head20():
    n = 20
    fx = Fixture("l2norm_head20", "l2norm", {"n": n, "eps": 1e-6}, pitfall="docs/semantics.md §3.10, §11 #10, §12.6")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=40.0), normal(r, n, scale=1e-4),
                                 normal(r, n, scale=3e-4), normal(r, n, scale=2e-5), normal(r, n, scale=0.3)]))
    l2_common(fx)
    fx.notes.append("rows 2-4 have sum(x^2) from ~1e-8 to ~2e-6, so eps = 1e-6 inside the sqrt is visible")
    return fx


@fixture
def l2norm_head128():
    n = 128
    fx = Fixture("l2norm_head128", "l2norm", {"n": n, "eps": 1e-6}, pitfall="docs/semantics.md §11 #10")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=1e-4), normal(r, n, scale=5.0)]))
    l2_common(fx)
    return fx


# --- situ_glu --------------------------------------------------------------------------------------------

@fixture
def situ_glu_wide_range():
    n = 64
    b1, b2 = TINY["beta"], TINY["linear_beta"]
    fx = Fixture("situ_glu_wide_range", "situ_glu", {"n": n, "beta": b1, "linear_beta": b2},
                 pitfall="docs/semantics.md §11 #7 (sigmoid of the UNCAPPED gate; both tanh caps)")
    r = rng_for(fx.name)
    T = 4
    mag = lambda: 10.0 ** r.uniform(-1.0, 3.0, (T, n)) * np.where(r.random((T, n)) < 0.5, -1.0, 1.0)
    gate, up = mag(), mag()
    gate[0, :8] = [0.1, -0.1, 1000.0, -1000.0, 10.0, -10.0, 6.0, 3.0]
    up[0, :8] = [1000.0, -1000.0, 0.1, -0.1, 60.0, 30.0, -100.0, 1000.0]
    fx.add("gate", "f32", gate)
    fx.add("up", "f32", up)
    g, u = fx.values["gate"], fx.values["up"]
    fx.run = lambda A, mut=(): {"y": em.situ_glu(g, u, b1, b2, A, mut)}
    fx.mutant("sigmoid_of_capped_gate", "sigmoid takes the tanh-capped gate")
    fx.mutant("no_gate_cap", "gate not capped by beta*tanh(g/beta)")
    fx.mutant("no_up_cap", "up not capped by linear_beta*tanh(u/linear_beta)")
    fx.mutant("swap_betas", "beta and linear_beta swapped")
    fx.mutant("silu_glu", "plain SiLU-GLU silu(g)*u")
    return fx


# --- short_conv ------------------------------------------------------------------------------------------

def conv_fixture(name, T, state_from):
    C, K = 12, TINY["conv"]
    fx = Fixture(name, "short_conv", {"channels": C, "kernel": K},
                 pitfall="docs/semantics.md §3.9, §11 #12 (taps oldest->newest, w[c][K-1] x current; state carried)")
    r = rng_for("short_conv_weights")
    w = r.uniform(-1.2, 1.2, (C, K))
    w[:, K - 1] += 0.8          # non-symmetric taps: the current-input tap differs from the oldest one
    x0 = normal(r, 6, C, scale=1.5)
    if state_from is None:
        wv = fx.add("w", "bf16", w)
        x = fx.add("x", "f32", x0)
        s = fx.add("state_in", "f32", np.zeros((C, K - 1)))
    else:
        wv = fx.add("w", "bf16", w)
        _, s_prev = em.short_conv(wv, F32(x0).astype(F64), np.zeros((C, K - 1)), F64)
        # the state a correct engine carries is the last K-1 raw inputs, exactly (f32)
        s = fx.add("state_in", "f32", s_prev)
        x = fx.add("x", "f32", normal(rng_for(name), T, C, scale=1.5))
    fx.run = lambda A, mut=(): dict(zip(("y", "state_out"), em.short_conv(wv, x, s, A, mut)))
    fx.mutant("reversed_taps", "taps newest->oldest (w[c][0] x current input)")
    fx.mutant("no_silu", "SiLU not fused")
    fx.mutant("state_stores_output", "state keeps conv outputs instead of raw inputs")
    if state_from is not None:
        fx.mutant("ignore_state_in", "continuation restarted from zero history")
        fx.mutant("state_newest_first", "state read/written newest first")
    return fx


@fixture
def short_conv_zero_state():
    return conv_fixture("short_conv_zero_state", 6, None)


@fixture
def short_conv_continuation():
    fx = conv_fixture("short_conv_continuation", 3, "short_conv_zero_state")
    fx.notes.append("state_in is short_conv_zero_state's state_out (the same w); together they test carry-over")
    return fx


# --- kda_gate --------------------------------------------------------------------------------------------

@fixture
def kda_gate_padded_a_log():
    H, D, lb = TINY["kda_heads"], TINY["kda_dim"], TINY["lb"]
    fx = Fixture("kda_gate_padded_a_log", "kda_gate", {"heads": H, "head_dim": D, "lower_bound": lb},
                 pitfall="docs/semantics.md §3.11, §11 #3, §12.3 (A_log per head out of a zero-padded tensor)")
    r = rng_for(fx.name)
    a_log = np.zeros(D)
    a_log[:H] = [-0.4, 0.5, 1.2]
    T = 4
    graw = normal(r, T, H * D, scale=1.5)
    graw[0, :6] = [200.0, -200.0, 60.0, -60.0, 30.0, -30.0]     # sigmoid saturation both ways (u up to ~130: exp overflows in float)
    graw[1, 45:48] = [150.0, -150.0, 45.0]
    fx.add("a_log", "f32", a_log)
    fx.add("dt_bias", "f32", normal(r, H * D, scale=0.5))
    fx.add("graw", "f32", graw)
    v = fx.values
    fx.run = lambda A, mut=(): {"g": em.kda_gate(v["a_log"], v["dt_bias"], v["graw"], H, D, lb, A, mut)}
    fx.mutant("a_log_per_channel", "exp(A_log[d]) per channel (reads the zero padding)")
    fx.mutant("softplus_gate", "-exp(A_log)*softplus(z+dt_bias) (Kimi-Linear-48B form, no lower bound)")
    fx.mutant("no_dt_bias", "dt_bias not added")
    fx.mutant("naive_sigmoid", "sigmoid as e^u/(1+e^u) in float (NaN on large u)", A=F32)
    fx.notes.append("a_log has %d entries, entries %d.. are exactly 0" % (D, H))
    return fx


# --- kda_recurrence --------------------------------------------------------------------------------------

def kda_inputs(fx, r, T, H, D, nonzero_state):
    q = normal(r, T, H, D)
    k = normal(r, T, H, D)
    k[:, 0, 3] = 0.0
    k[:, 1, 7:10] = 0.0
    k[0, 2, ::4] = 0.0
    q = em.l2norm(q, 1e-6, F32)
    k = em.l2norm(k, 1e-6, F32)
    fx.add("q", "f32", q)
    fx.add("k", "f32", k)
    fx.add("v", "f32", normal(r, T, H, D))
    fx.add("g", "f32", em.kda_gate(np.zeros(H), np.zeros(H * D), normal(r, T, H * D, scale=2.0), H, D, -5.0, F64)
           .reshape(T, H, D))
    fx.add("beta", "f32", r.uniform(0.05, 0.95, (T, H)))
    fx.add("state_in", "f32", normal(r, H, D, D, scale=0.5) if nonzero_state else np.zeros((H, D, D)))


def kda_rec_fixture(name, T, nonzero):
    H, D = TINY["kda_heads"], TINY["kda_dim"]
    fx = Fixture(name, "kda_recurrence", {"heads": H, "head_dim": D},
                 pitfall="docs/semantics.md §3.12, §11 #9 (decay, read, delta write, output from the UPDATED state, q*D^-0.5)")
    kda_inputs(fx, rng_for(name), T, H, D, nonzero)
    v = fx.values
    fx.run = lambda A, mut=(): dict(zip(("o", "state_out"),
                                        em.kda_recurrence(v["q"], v["k"], v["v"], v["g"], v["beta"], v["state_in"], A, mut)))
    fx.mutant("output_from_old_state", "o read from the state before the delta write")
    fx.mutant("no_q_scale", "q not scaled by D^-0.5")
    fx.mutant("q_scale_inverse_d", "q scaled by 1/D")
    if nonzero or T > 1:
        fx.mutant("decay_after_read", "u read from the undecayed state")
        fx.mutant("decay_columns", "alpha applied over the v axis")
        fx.mutant("transposed_read", "u = S k instead of S^T k (state layout transposed)")
    if nonzero:
        fx.mutant("skip_decay_on_zero_k", "rows with k[i] == 0 skipped by the decay too")
    fx.notes.append("k has exact zero entries (head 0 dim 3, head 1 dims 7-9 every token)")
    return fx


@fixture
def kda_recurrence_t1_zero_state():
    return kda_rec_fixture("kda_recurrence_t1_zero_state", 1, False)


@fixture
def kda_recurrence_t1_from_state():
    return kda_rec_fixture("kda_recurrence_t1_from_state", 1, True)


@fixture
def kda_recurrence_t8_zero_state():
    return kda_rec_fixture("kda_recurrence_t8_zero_state", 8, False)


@fixture
def kda_recurrence_t8_from_state():
    return kda_rec_fixture("kda_recurrence_t8_from_state", 8, True)


# --- matvec ----------------------------------------------------------------------------------------------

def matvec_fixture(name, n_in, n_out, wdtype, T=2):
    fx = Fixture(name, "matvec", {"in": n_in, "out": n_out},
                 pitfall="docs/semantics.md §3.3, §11 #26 (double accumulation; 16-lane blocks with a ragged tail)")
    r = rng_for(name)
    w = normal(r, n_out, n_in, scale=0.5)
    x = normal(r, T, n_in)
    # large cancelling pairs: x[j] = -x[i] exactly and w[o][i] == w[o][j] for every row, i and j in the same lane
    full = n_in - n_in % 16
    pairs = [(i, i + 16 * m) for i, m in zip(range(0, 128, 9), (2, 5, 3, 7, 1, 4, 6, 2, 3, 5, 1, 4, 2, 6, 3))]
    pairs = [(i, j) for i, j in pairs if j < full]
    for t in range(T):
        for n_p, (i, j) in enumerate(pairs):
            big = (2.0 ** 14) * (1.0 + 0.37 * ((n_p * 7 + t) % 5)) * (1 if (n_p + t) % 2 else -1)
            x[t, i], x[t, j] = big, -big
    for i, j in pairs:
        w[:, j] = w[:, i]
    if n_in % 16:
        x[:, n_in - 1] = 40.0 * np.where(np.arange(T) % 2, 1.0, -1.0)     # the ragged tail carries signal
    wv = fx.add("w", wdtype, w)
    xv = fx.add("x", "f32", x)
    fx.run = lambda A, mut=(): {"y": em.matvec(wv, xv, A, mut)}
    fx.mutant("float_accum_sequential", "float (not double) accumulator, sequential", A=F32)
    fx.mutant("float_accum_16_lanes", "16 float lanes with the same tree", A=F32)
    if n_in % 16:
        fx.mutant("drop_ragged_tail", "tail (in mod 16) dropped")
    fx.notes.append("%d pairs of cancelling products of magnitude ~2^14 per row" % len(pairs))
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


# --- router ----------------------------------------------------------------------------------------------

def router_fixture(name, top_k, renorm, scaling, T=8):
    N, E = TINY["experts"], TINY["E"]
    fx = Fixture(name, "router", {"experts": N, "top_k": top_k, "renormalize": renorm, "scaling": scaling},
                 pitfall="docs/semantics.md §3.7, §11 #5, §12.2 (bias selects only; unbiased weights; renorm + 1e-20)")
    r = rng_for(name)
    for attempt in range(200):
        x = normal(r, T, E)
        gw = normal(r, N, E, scale=0.12)
        bias = r.uniform(-0.35, 0.35, N)
        xv, gv, bv = F32(x), bf16_value(bf16_bits(gw)), F32(bias)
        score = em.sigmoid(np.einsum("ti,ei->te", xv.astype(F64), gv.astype(F64)).astype(F32), F32).astype(F64)
        choice = score + bv
        reordered = 0
        ok = True
        for t in range(T):
            cb = np.sort(choice[t])[::-1]
            if np.min(cb[:top_k + 1][:-1] - cb[:top_k + 1][1:]) < 2e-3:
                ok = False
            if set(np.argsort(-choice[t])[:top_k]) != set(np.argsort(-score[t])[:top_k]):
                reordered += 1
        if ok and reordered >= T - 1:
            break
    else:
        raise SystemExit(name + ": no draw with a bias that reorders the top-k")
    fx.add("x", "f32", x)
    fx.add("gate_w", "bf16", gw)
    fx.add("bias", "f32", bias)
    v = fx.values
    fx.run = lambda A, mut=(): dict(zip(("indices", "weights"),
                                        em.router(v["x"], v["gate_w"], v["bias"], top_k, renorm, scaling, A, mut)))
    fx.exact.add("indices")
    fx.mutant("unbiased_selection", "bias ignored for selection")
    fx.mutant("biased_weights", "combine weights taken from the biased scores")
    fx.mutant("softmax_scores", "softmax instead of sigmoid scores")
    if renorm and top_k > 1:
        fx.mutant("no_renorm", "weights not renormalised")
    if renorm and top_k == 1:
        fx.mutant("renorm_even_k1", "renormalised although top_k = 1 (C README form)")
    if scaling != 1.0:
        fx.mutant("no_scaling", "routed_scaling_factor not applied")
    fx.notes.append("the bias changes the top-%d SET on %d of %d rows; adjacent biased choices differ by >= 2e-3"
                    % (top_k, reordered, T))
    return fx


@fixture
def router_ties():
    N, E, K, T = TINY["experts"], TINY["E"], TINY["top_k"], 4
    fx = Fixture("router_ties", "router", {"experts": N, "top_k": K, "renormalize": True, "scaling": TINY["scaling"]},
                 pitfall="docs/semantics.md §3.7 (top-k by repeated strict maximum: exact ties go to the LOWEST expert id)")
    r = rng_for(fx.name)
    x = normal(r, T, E)
    gw = normal(r, N, E, scale=0.05)
    bias = r.uniform(-0.05, 0.05, N)
    # experts 2 and 9 are identical and clearly on top: both picked, order decided by the tie rule;
    # experts 4 and 10 are identical and straddle the k boundary on every row: only the lower id may be picked
    gw[2] = gw[9] = 0.0
    bias[2] = bias[9] = 1.0
    gw[4] = gw[10] = 0.0
    bias[4] = bias[10] = 0.3
    fx.add("x", "f32", x)
    fx.add("gate_w", "bf16", gw)
    fx.add("bias", "f32", bias)
    v = fx.values
    fx.run = lambda A, mut=(): dict(zip(("indices", "weights"),
                                        em.router(v["x"], v["gate_w"], v["bias"], K, True, TINY["scaling"], A, mut)))
    fx.exact.add("indices")
    fx.mutant("ties_to_highest_id", "exact ties resolved to the highest expert id (e.g. >= in the scan)")
    fx.notes.append("experts 2/9 and 4/10 have identical gate rows and biases (exact ties in any precision); "
                    "expected order per row: 2, 9, 4")
    return fx


@fixture
def router_renorm_scaled():
    return router_fixture("router_renorm_scaled", TINY["top_k"], True, TINY["scaling"])


@fixture
def router_plain():
    return router_fixture("router_plain", TINY["top_k"], False, 1.0)


@fixture
def router_top1_renorm():
    return router_fixture("router_top1_renorm", 1, True, TINY["scaling"])


# --- attn_res --------------------------------------------------------------------------------------------

def attn_res_fixture(name, S, T, E, scales):
    fx = Fixture(name, "attn_res", {"eps": TINY["rms_eps"]},
                 pitfall="docs/semantics.md §3.15, §4.1, §11 #13 (softmax over sources; keys normalised, values raw)")
    r = rng_for(name)
    src = np.stack([normal(r, T, E) * np.asarray(scales[s])[:, None] + 0.3 * normal(r, E) for s in range(S)])
    fx.add("sources", "f32", src)
    fx.add("norm_w", "bf16", r.uniform(0.4, 1.6, E))
    fx.add("proj_w", "bf16", normal(r, E, scale=0.18))
    v = fx.values
    fx.run = lambda A, mut=(): {"y": em.attn_res(v["sources"], v["norm_w"], v["proj_w"], fx.params["eps"], A, mut)}
    fx.mutant("raw_keys", "scores from the raw (un-normalised) sources")
    fx.mutant("normalised_values", "mix of the normalised sources")
    fx.mutant("fold_without_norm_gain", "norm weight left out of the score vector")
    fx.mutant("uniform_mix", "plain average (no softmax scores)")
    return fx


@fixture
def attn_res_two_snapshots():
    return attn_res_fixture("attn_res_two_snapshots", 3, 4, TINY["E"],
                            [[6.0, 0.5, 1.0, 3.0], [0.2, 2.0, 1.0, 0.05], [1.0, 1.0, 8.0, 0.3]])


@fixture
def attn_res_four_snapshots():
    return attn_res_fixture("attn_res_four_snapshots", 5, 3, 100,
                            [[1.0, 4.0, 0.1], [0.3, 1.0, 2.0], [9.0, 0.1, 1.0], [0.02, 1.0, 1.0], [1.0, 0.003, 5.0]])


# --- dense_mlp -------------------------------------------------------------------------------------------

@fixture
def dense_mlp_caps():
    E, I, T = TINY["E"], TINY["dense_inter"], 3
    b1, b2 = TINY["beta"], TINY["linear_beta"]
    fx = Fixture("dense_mlp_caps", "dense_mlp", {"hidden": E, "intermediate": I, "beta": b1, "linear_beta": b2},
                 pitfall="docs/semantics.md §3.18 (SiTU-GLU, gate = gate_proj, up = up_proj)")
    r = rng_for(fx.name)
    x = normal(r, T, E)
    fx.add("x", "f32", x)
    fx.add("mlp.gate_proj.weight", "bf16", normal(r, I, E, scale=1.0) * r.uniform(0.05, 1.2, (I, 1)))
    fx.add("mlp.up_proj.weight", "bf16", normal(r, I, E, scale=1.0) * r.uniform(0.05, 4.0, (I, 1)))
    fx.add("mlp.down_proj.weight", "bf16", normal(r, E, I, scale=0.02))
    v = fx.values
    fx.run = lambda A, mut=(): {"y": em.situ_mlp(v["mlp.gate_proj.weight"], v["mlp.up_proj.weight"],
                                                 v["mlp.down_proj.weight"], v["x"], b1, b2, A, mut)}
    fx.mutant("silu_glu", "plain SiLU-GLU")
    fx.mutant("sigmoid_of_capped_gate", "sigmoid of the capped gate")
    fx.mutant("no_up_cap", "up not capped")
    fx.mutant("swap_gate_up", "gate and up projections swapped")
    return fx


# --- kda_layer -------------------------------------------------------------------------------------------

def kda_weights(fx, r, E, H, D, K):
    P = H * D
    W = {}
    a = lambda n, dt, arr: W.__setitem__(n, fx.add(n, dt, arr))
    a("self_attn.q_proj.weight", "bf16", normal(r, P, E, scale=E ** -0.5))
    a("self_attn.k_proj.weight", "bf16", normal(r, P, E, scale=E ** -0.5))
    a("self_attn.v_proj.weight", "bf16", normal(r, P, E, scale=E ** -0.5))
    a("self_attn.g_proj.weight", "bf16", normal(r, P, E, scale=1.5 * E ** -0.5))
    a("self_attn.o_proj.weight", "bf16", normal(r, E, P, scale=P ** -0.5))
    for c in "qkv":
        wc = r.uniform(-0.8, 0.8, (P, 1, K))
        wc[:, 0, K - 1] += 1.0
        a("self_attn.%s_conv1d.weight" % c, "bf16", wc)
    a("self_attn.f_a_proj.weight", "bf16", normal(r, D, E, scale=E ** -0.5))
    a("self_attn.f_b_proj.weight", "bf16", normal(r, P, D, scale=1.2 * D ** -0.5))
    a("self_attn.b_proj.weight", "bf16", normal(r, H, E, scale=E ** -0.5))
    a_log = np.zeros(D)
    a_log[:H] = np.linspace(-0.4, 1.2, H)
    a("self_attn.A_log", "f32", a_log)
    a("self_attn.dt_bias", "f32", normal(r, P, scale=0.5))
    a("self_attn.o_norm.weight", "bf16", r.uniform(0.3, 1.7, D))
    return W


KDA_STATES = ("recurrent_state", "q_conv_state", "k_conv_state", "v_conv_state")


def kda_layer_fixture(name, T, from_fixture):
    E, H, D, K = TINY["E"], TINY["kda_heads"], TINY["kda_dim"], TINY["conv"]
    P = H * D
    p = {"hidden": E, "heads": H, "head_dim": D, "conv_kernel": K, "lower_bound": TINY["lb"], "rms_eps": TINY["rms_eps"]}
    fx = Fixture(name, "kda_layer", p, pitfall="docs/semantics.md §3.13, §11 #3 #9 #10 #11 #12")
    W = kda_weights(fx, rng_for("kda_layer_weights"), E, H, D, K)
    r = rng_for(name)
    x = fx.add("x", "f32", normal(r, T, E))
    shapes = {"recurrent_state": (H, D, D), "q_conv_state": (P, K - 1), "k_conv_state": (P, K - 1),
              "v_conv_state": (P, K - 1)}
    if from_fixture is None:
        st = {s: fx.add(s + "_in", "f32", np.zeros(shapes[s])) for s in KDA_STATES}
    else:
        prev = kda_layer_prev_state[from_fixture]
        st = {s: fx.add(s + "_in", "f32", prev[s]) for s in KDA_STATES}

    def run(A, mut=()):
        out, so = em.kda_layer(x, W, st, p, A, mut)
        d = {"out": out}
        d.update({s + "_out": so[s] for s in KDA_STATES})
        return d
    fx.run = run
    for m, what in [("a_log_per_channel", "exp(A_log[d]) per channel"), ("gate_then_norm", "sigmoid gate before the head RMSNorm"),
                    ("no_q_scale", "q not scaled by D^-0.5"), ("l2norm_v", "v L2-normalised too"),
                    ("conv_reversed_taps", "conv taps reversed"), ("output_from_old_state", "o from the pre-update state")]:
        fx.mutant(m, what)
    if from_fixture is not None:
        fx.notes.append("states in = %s's states out (f32-rounded float64 reference values)" % from_fixture)
    return fx


kda_layer_prev_state = {}


@fixture
def kda_layer_t8_zero_state():
    fx = kda_layer_fixture("kda_layer_t8_zero_state", 8, None)
    return fx


@fixture
def kda_layer_t1_from_state():
    return kda_layer_fixture("kda_layer_t1_from_state", 1, "kda_layer_t8_zero_state")


# --- mla_layer -------------------------------------------------------------------------------------------

def mla_weights(fx, r, E, p, lora_scale=1.0):
    Hm, ql, kvl, qn, qr, vh = p["heads"], p["q_lora"], p["kv_lora"], p["qk_nope"], p["qk_rope"], p["v_head"]
    W = {}
    a = lambda n, dt, arr: W.__setitem__(n, fx.add(n, dt, arr))
    a("self_attn.q_a_proj.weight", "bf16", normal(r, ql, E, scale=lora_scale * E ** -0.5))
    a("self_attn.q_a_layernorm.weight", "bf16", r.uniform(0.5, 1.5, ql))
    qb = normal(r, Hm * (qn + qr), ql, scale=2.2 * ql ** -0.5)
    a("self_attn.q_b_proj.weight", "bf16", qb)
    kva = normal(r, kvl + qr, E, scale=E ** -0.5)
    kva[:kvl] *= lora_scale
    kva[kvl:] *= 2.5                                       # the shared rope key carries signal
    a("self_attn.kv_a_proj_with_mqa.weight", "bf16", kva)
    a("self_attn.kv_a_layernorm.weight", "bf16", r.uniform(0.5, 1.5, kvl))
    a("self_attn.kv_b_proj.weight", "bf16", normal(r, Hm * (qn + vh), kvl, scale=1.6 * kvl ** -0.5))
    a("self_attn.o_proj.weight", "bf16", normal(r, E, Hm * vh, scale=(Hm * vh) ** -0.5))
    a("self_attn.g_proj.weight", "bf16", normal(r, Hm * vh, E, scale=1.5 * E ** -0.5))
    return W


def mla_params():
    return {"hidden": TINY["E"], "heads": TINY["mla_heads"], "q_lora": TINY["q_lora"], "kv_lora": TINY["kv_lora"],
            "qk_nope": TINY["qk_nope"], "qk_rope": TINY["qk_rope"], "v_head": TINY["v_head"], "rms_eps": TINY["rms_eps"]}


@fixture
def mla_layer_t6():
    p = mla_params()
    E, T = p["hidden"], 6
    fx = Fixture("mla_layer_t6", "mla_layer", p, pitfall="docs/semantics.md §3.14, §11 #4 #11, §12.1 (LoRA-norm eps 1e-6)")
    W = mla_weights(fx, rng_for("mla_layer_weights"), E, p)
    r = rng_for(fx.name)
    x = normal(r, T, E) * np.array([1.0, 2e-3, 0.5, 1e-3, 3e-3, 1.5])[:, None]
    xv = fx.add("x", "f32", x)
    fx.run = lambda A, mut=(): {"out": em.mla_layer(xv, W, p, A, mut)}
    fx.mutant("lora_eps_from_config", "q_a/kv_a LoRA norms with rms_eps 1e-5 instead of 1e-6")
    fx.mutant("scale_nope_only", "softmax scale qk_nope^-0.5")
    fx.mutant("drop_rope", "rope slot dropped from the scores")
    fx.mutant("non_causal", "no causal mask")
    fx.mutant("no_output_gate", "output gate left out")
    fx.notes.append("tokens 1, 3, 4 have LoRA activations with mean square ~1e-6 (eps 1e-6 vs 1e-5 decisive)")
    return fx


# --- latent_moe ------------------------------------------------------------------------------------------

def moe_params():
    return {"hidden": TINY["E"], "experts": TINY["experts"], "top_k": TINY["top_k"], "latent": TINY["latent"],
            "moe_inter": TINY["moe_inter"], "shared_inter": TINY["moe_inter"] * TINY["shared"],
            "renormalize": True, "scaling": TINY["scaling"], "rms_eps": TINY["rms_eps"], "beta": TINY["beta"],
            "linear_beta": TINY["linear_beta"]}


def moe_weights(fx, r, p):
    E, N, Lt, I, SI = p["hidden"], p["experts"], p["latent"], p["moe_inter"], p["shared_inter"]
    pre = "block_sparse_moe."
    W = {}
    a = lambda n, dt, arr: W.__setitem__(n, fx.add(pre + n, dt, arr)) or None
    a("gate.weight", "bf16", normal(r, N, E, scale=0.12))
    a("gate.e_score_correction_bias", "f32", r.uniform(-0.3, 0.3, N))
    a("routed_expert_down_proj.weight", "bf16", normal(r, Lt, E, scale=1.3 * E ** -0.5))
    a("routed_expert_up_proj.weight", "bf16", normal(r, E, Lt, scale=Lt ** -0.5))
    a("routed_expert_norm.weight", "bf16", r.uniform(0.4, 1.6, Lt))
    a("shared_experts.gate_proj.weight", "bf16", normal(r, SI, E, scale=2.0 * E ** -0.5))
    a("shared_experts.up_proj.weight", "bf16", normal(r, SI, E, scale=3.0 * E ** -0.5))
    a("shared_experts.down_proj.weight", "bf16", normal(r, E, SI, scale=0.3 * SI ** -0.5))
    for e in range(N):
        for wn, rows, n_in, sb in (("w1", I, Lt, 124), ("w3", I, Lt, 125), ("w2", Lt, I, 121)):
            codes = r.integers(0, 16, (rows, n_in))
            scales = sb + r.integers(-2, 3, (rows, n_in // 32))
            if e == 5 and wn == "w1":
                scales[7, 1] = 255
            a("experts.%d.%s.weight_packed" % (e, wn), "u8", pack_codes(codes))
            a("experts.%d.%s.weight_scale" % (e, wn), "u8", scales)
    return {k: v for k, v in fx.values.items() if k.startswith(pre)}


@fixture
def latent_moe_t4():
    p = moe_params()
    fx = Fixture("latent_moe_t4", "latent_moe", p, pitfall="docs/semantics.md §3.17, §11 #5 #6 #8")
    W = moe_weights(fx, rng_for("latent_moe_weights"), p)
    r = rng_for(fx.name)
    xv = fx.add("x", "f32", normal(r, 4, p["hidden"]))
    fx.run = lambda A, mut=(): dict(zip(("y", "indices", "weights"), em.latent_moe(xv, W, p, A, mut)))
    fx.exact.add("indices")
    fx.mutant("per_expert_norm", "RMSNorm per expert output instead of on the aggregate")
    fx.mutant("no_latent_norm", "latent RMSNorm skipped")
    fx.mutant("shared_weighted", "shared experts scaled by routed_scaling_factor")
    fx.mutant("biased_weights", "combine weights from biased scores")
    fx.mutant("unbiased_selection", "selection ignores the bias")
    fx.mutant("swap_nibbles", "MXFP4 high nibble = even element")
    fx.notes.append("experts.5.w1 row 7 group 1 has scale byte 255")
    return fx


# --- decoder_layer (level "layer") ----------------------------------------------------------------------

def flatten(p):
    """Manifest params are scalars: nested geometry groups become "<group>.<key>"."""
    out = {}
    for k, v in p.items():
        if isinstance(v, dict):
            out.update({"%s.%s" % (k, kk): vv for kk, vv in v.items()})
        else:
            out[k] = v
    return out


def decoder_fixture(name, layer_index, n_snap):
    E, T = TINY["E"], 4
    is_mla = (layer_index + 1) in (4, 8, 12, 13)            # tiny-k3 full_attn_layers, ONE-based
    kp = {"hidden": E, "heads": TINY["kda_heads"], "head_dim": TINY["kda_dim"], "conv_kernel": TINY["conv"],
          "lower_bound": TINY["lb"], "rms_eps": TINY["rms_eps"]}
    p = {"layer_index": layer_index, "attn_res_block_size": TINY["block"], "is_mla": is_mla,
         "boundary": layer_index % TINY["block"] == 0, "rms_eps": TINY["rms_eps"], "hidden": E}
    p["mla" if is_mla else "kda"] = mla_params() if is_mla else kp
    p["moe"] = moe_params()
    fx = Fixture(name, "decoder_layer", flatten(p), level="layer",
                 pitfall="docs/semantics.md §4.1, §11 #13 (snapshot = incoming partial, push AND clear on a boundary; "
                         "the layer returns the running partial)")
    r = rng_for(name)
    fx.add("partial", "f32", normal(r, T, E) * 1.5)
    fx.add("snapshots", "f32", np.stack([normal(r, T, E) * s for s in (2.0, 0.6, 1.0)[:n_snap]]))
    W = {}
    a = lambda nm, dt, arr: W.__setitem__(nm, fx.add(nm, dt, arr))
    a("input_layernorm.weight", "bf16", r.uniform(0.5, 1.5, E))
    a("post_attention_layernorm.weight", "bf16", r.uniform(0.5, 1.5, E))
    a("self_attention_res_norm.weight", "bf16", r.uniform(0.4, 1.6, E))
    a("self_attention_res_proj.weight", "bf16", normal(r, 1, E, scale=0.18))
    a("mlp_res_norm.weight", "bf16", r.uniform(0.4, 1.6, E))
    a("mlp_res_proj.weight", "bf16", normal(r, 1, E, scale=0.18))
    if is_mla:
        W.update(mla_weights(fx, rng_for(name + "_mixer"), E, p["mla"], lora_scale=1.5e-3))
    else:
        W.update(kda_weights(fx, rng_for(name + "_mixer"), E, kp["heads"], kp["head_dim"], kp["conv_kernel"]))
    W.update(moe_weights(fx, rng_for(name + "_moe"), p["moe"]))
    pv, sv = fx.values["partial"], fx.values["snapshots"]
    fx.run = lambda A, mut=(): em.decoder_layer(pv, list(sv), W, p, A, mut)
    fx.mutant("normalised_values", "AttnRes mixes the normalised candidates")
    fx.mutant("return_mixed", "layer returns the mixed MLP input + MLP output instead of the running partial")
    fx.mutant("skip_pre_attn_mix", "pre-attention AttnRes skipped although snapshots exist")
    if p["boundary"]:
        fx.mutant("snapshot_mixed", "boundary pushes the MIXED x instead of the incoming partial")
        fx.mutant("no_clear", "boundary keeps the running partial instead of clearing it")
    if is_mla:
        fx.notes.append("q_a_proj and the latent rows of kv_a_proj_with_mqa are scaled by 1.5e-3: LoRA activations "
                        "with mean square ~1e-6, so the LoRA-norm eps (1e-6, not rms_eps) is decisive")
    fx.extra["config"] = "oracle-fixtures/tiny-k3/config.json"
    fx.notes.append("layer %d of tiny-k3 (%s, %s), %d snapshots in; KDA state starts at zero, MLA uncached"
                    % (layer_index, "MLA" if is_mla else "KDA", "block boundary" if p["boundary"] else "no boundary", n_snap))
    return fx


@fixture
def decoder_layer_kda_boundary():
    return decoder_fixture("decoder_layer_kda_boundary", 5, 1)


@fixture
def decoder_layer_mla():
    return decoder_fixture("decoder_layer_mla", 7, 2)


# ----------------------------------------------------------------------------------------------- reference

def reference_outputs(fx):
    """Expected outputs: the float64 torch reference (k3ref.ops) via adapters; falls back to the local float64
    model only when K3J_OPS_LOCAL_REF=1 (development before the reference landed; recorded in the manifest)."""
    if os.environ.get("K3J_OPS_LOCAL_REF") == "1":
        return fx.run(F64), "local float64 model (engine_model.py), k3ref.ops not yet available"
    import ref_adapter
    return ref_adapter.expected(fx), "reference-dumps/torch/k3ref/ops.py (float64)"


# ----------------------------------------------------------------------------------------------- tolerances

def choose_tolerance(want, got32):
    want = np.asarray(want, F64)
    scale = float(np.sqrt(np.mean(want ** 2))) if want.size else 1.0
    if scale == 0.0:
        scale = 1.0
    for c in LADDER:
        atol, rtol = c * scale, c
        if worst_ratio(got32, want, atol, rtol) * SAFETY <= 1.0:
            return {"atol": float("%.3g" % atol), "rtol": rtol}
    raise SystemExit("no tolerance on the ladder covers the fp32 engine model")


def fmt(x):
    return float("%.3g" % x) if np.isfinite(x) else "inf"


def build(fx, outdir):
    want, ref_src = reference_outputs(fx)
    local = fx.run(F64)
    for k in want:
        a, b = np.asarray(want[k], F64), np.asarray(local[k], F64)
        if a.shape != b.shape:
            raise SystemExit("%s: reference and local model shapes differ on %s" % (fx.name, k))
        if k in fx.exact:
            agree = np.array_equal(a, b)
        else:
            agree = not a.size or float(np.max(np.abs(a - b) / (1e-9 * (np.sqrt(np.mean(a ** 2)) + np.abs(a))))) <= 1.0
        if not agree:
            raise SystemExit("%s: reference and the local model disagree on %s (max |d| %.3g)"
                             % (fx.name, k, float(np.max(np.abs(a - b)))))
    got32 = fx.run(F32)
    tol, fp32_ratio = {}, {}
    for k in want:
        if k in fx.exact:
            if not np.array_equal(np.asarray(got32[k], F64), np.asarray(want[k], F64)):
                raise SystemExit("%s: fp32 engine model is not exact on %s" % (fx.name, k))
            tol[k] = {"exact": True}
            fp32_ratio[k] = 0.0
        else:
            tol[k] = choose_tolerance(want[k], got32[k])
            fp32_ratio[k] = fmt(worst_ratio(got32[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
    mutants = {}
    text = []
    for mname, mut, A, what in fx.mutants:
        got = fx.run(A, mut)
        worst, exact_diff = 0.0, []
        for k in want:
            if k in fx.exact:
                nd = int(np.sum(np.asarray(got[k], F64) != np.asarray(want[k], F64)))
                if nd:
                    exact_diff.append("%s differ in %d of %d" % (k, nd, np.asarray(want[k]).size))
                    worst = float("inf")
            else:
                worst = max(worst, worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
        if worst < MIN_DEFEAT:
            raise SystemExit("%s: mutant %s fails by only %.3g x (< %g): make the input more adversarial"
                             % (fx.name, mname, worst, MIN_DEFEAT))
        if exact_diff:
            desc = "; ".join(exact_diff)
            float_w = max([worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]) for k in want if k not in fx.exact] or [0])
            if float_w:
                desc += "; float outputs %sx" % fmt(float_w)
            mutants[mname] = {"what": what, "worst_ratio": "inf", "detail": desc}
            text.append("%s (%s): %s" % (mname, what, desc))
        else:
            nan = not all(np.all(np.isfinite(np.asarray(got[k], F64))) for k in want)
            mutants[mname] = {"what": what, "worst_ratio": "inf" if nan else fmt(worst)}
            text.append("%s (%s): fails by %s" % (mname, what, "NaN/Inf" if nan else "%.3gx" % worst))
    ref_mut = {}
    if ref_src.startswith("reference-dumps"):
        import ref_adapter
        for mname, what in ref_adapter.ref_mutants(fx):
            got = ref_adapter.expected(fx, frozenset([mname]))
            worst, detail = 0.0, []
            for k in want:
                if k in fx.exact:
                    nd = int(np.sum(np.asarray(got[k], F64) != np.asarray(want[k], F64)))
                    if nd:
                        detail.append("%s differ in %d of %d" % (k, nd, np.asarray(want[k]).size))
                        worst = float("inf")
                else:
                    worst = max(worst, worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
            if worst < MIN_DEFEAT:
                raise SystemExit("%s: reference mutant %s fails by only %.3g x (< %g)" % (fx.name, mname, worst, MIN_DEFEAT))
            ref_mut[mname] = {"what": what, "worst_ratio": fmt(worst) if not detail else "inf"}
            if detail:
                ref_mut[mname]["detail"] = "; ".join(detail)
            text.append("k3ref mutant %s: %s" % (mname, "; ".join(detail) if detail else "fails by %.3gx" % worst))
    torch32 = {}
    if ref_src.startswith("reference-dumps"):
        import torch
        import ref_adapter
        got = ref_adapter.expected(fx, frozenset(), torch.float32)
        for k in want:
            if k in fx.exact:
                torch32[k] = 0.0 if np.array_equal(np.asarray(got[k], F64), np.asarray(want[k], F64)) else "inf"
            else:
                torch32[k] = fmt(worst_ratio(got[k], want[k], tol[k]["atol"], tol[k]["rtol"]))
    os.makedirs(os.path.join(outdir, fx.name), exist_ok=True)

    def write(arrname, dtype, arr):
        rel = "%s/%s.bin" % (fx.name, arrname)
        enc = {"f32": "<f4", "f64": "<f8", "bf16": "<u2", "u8": "u1", "i32": "<i4"}[dtype]
        data = np.ascontiguousarray(np.asarray(arr).astype(enc)).tobytes()
        with open(os.path.join(outdir, rel), "wb") as f:
            f.write(data)
        return {"file": rel, "dtype": dtype, "shape": list(np.asarray(arr).shape),
                "sha256": hashlib.sha256(data).hexdigest()}
    inputs = {n: write(n, dt, raw) for n, (dt, raw) in fx.inputs.items()}
    outputs = {}
    for k, v in want.items():
        dt = "i32" if np.asarray(v).dtype.kind in "iu" else "f64"
        outputs[k] = write(k, dt, v)
    entry = {"name": fx.name, "kernel": fx.kernel, "level": fx.level, "params": fx.params,
             "inputs": inputs, "outputs": outputs, "tolerance": tol,
             "adversarial": "; ".join(text) + ("" if not fx.notes else ". " + ". ".join(fx.notes)),
             "fp32_worst_ratio": fp32_ratio, "torch_fp32_worst_ratio": torch32, "mutants": mutants, "reference_mutants": ref_mut,
             "expected_from": ref_src}
    if fx.pitfall:
        entry["pitfall"] = fx.pitfall
    entry.update(fx.extra)
    return entry, want


def router_margin(fx, want):
    """Smallest gap between adjacent biased choices among the top-(k+1), in float64: an index output is exact, so
    the fixture must not sit on a near-tie that fp32 rounding could flip (ties on purpose are exact ties)."""
    pre = "block_sparse_moe."
    v, p = fx.values, fx.params
    if fx.kernel == "router":
        x, gw, b, k = v["x"], v["gate_w"], v["bias"], p["top_k"]
    elif fx.kernel == "latent_moe":
        x, gw, b, k = v["x"], v[pre + "gate.weight"], v[pre + "gate.e_score_correction_bias"], p["top_k"]
    elif fx.kernel == "decoder_layer":
        x = em.rmsnorm(want["mlp_in"], v["post_attention_layernorm.weight"], p["rms_eps"], F64)
        gw, b, k = v[pre + "gate.weight"], v[pre + "gate.e_score_correction_bias"], p["moe.top_k"]
    else:
        return None
    s = 1.0 / (1.0 + np.exp(-(np.asarray(x, F64) @ np.asarray(gw, F64).T)))
    c = -np.sort(-(s + np.asarray(b, F64)), axis=1)[:, :k + 1]
    gaps = (c[:, :-1] - c[:, 1:]).ravel()
    gaps = gaps[gaps > 0] if fx.name.startswith("router_ties") else gaps
    return float(np.min(gaps))


def generate(outdir, only=None):
    import torch
    entries = []
    for fn in REGISTRY:
        if only and fn.__name__ not in only:
            continue
        fx = fn()
        entry, want = build(fx, outdir)
        margin = router_margin(fx, want)
        if margin is not None:
            if margin < 1e-4:
                raise SystemExit("%s: router choices have a near-tie (%.3g < 1e-4): indices would be fragile" % (fx.name, margin))
            entry["router_min_margin"] = fmt(margin)
        if fx.kernel == "kda_layer":
            kda_layer_prev_state[fx.name] = {s: np.asarray(want[s + "_out"], F64) for s in KDA_STATES}
        entries.append(entry)
        print("%-34s %-15s tol %s  fp32 %s" % (fx.name, fx.kernel, json.dumps(entry["tolerance"]),
                                                json.dumps(entry["fp32_worst_ratio"])), flush=True)
        print("    mutants: " + ", ".join("%s %s" % (m, d.get("detail", d["worst_ratio"]))
                                          for m, d in entry["mutants"].items()), flush=True)
        print("    torch fp32 (float-accumulating matmuls, informational): " + json.dumps(entry["torch_fp32_worst_ratio"]))
        print("    k3ref mutants: " + ", ".join("%s %s" % (m, d.get("detail", d["worst_ratio"]))
                                                for m, d in entry["reference_mutants"].items()), flush=True)
    manifest = {"format": FORMAT, "generator": "oracle-fixtures/ops/gen_ops.py", "torch": torch.__version__,
                "numpy": np.__version__, "seed": SEED, "safety_factor": SAFETY, "min_defeat_factor": MIN_DEFEAT,
                "fixtures": entries}
    with open(os.path.join(outdir, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return manifest


# ----------------------------------------------------------------------------------------------- check

def check():
    committed = HERE
    with open(os.path.join(committed, "MANIFEST.json")) as f:
        old = json.load(f)
    tmp = tempfile.mkdtemp(prefix="k3j-ops-check-")
    bad = []
    try:
        new = generate(tmp)
        on = {e["name"]: e for e in old["fixtures"]}
        nn = {e["name"]: e for e in new["fixtures"]}
        if list(on) != list(nn):
            bad.append("fixture lists differ: %s vs %s" % (list(on), list(nn)))
        for name in nn:
            if name not in on:
                continue
            a, b = on[name], nn[name]
            for key in ("kernel", "level", "params", "tolerance", "pitfall"):
                if a.get(key) != b.get(key):
                    bad.append("%s: %s differs: %s vs %s" % (name, key, a.get(key), b.get(key)))
            for sect in ("inputs", "outputs"):
                if set(a[sect]) != set(b[sect]):
                    bad.append("%s: %s names differ" % (name, sect))
                    continue
                for arr, da in a[sect].items():
                    db = b[sect][arr]
                    pa, pb = os.path.join(committed, da["file"]), os.path.join(tmp, db["file"])
                    ba = open(pa, "rb").read()
                    bb = open(pb, "rb").read()
                    if hashlib.sha256(ba).hexdigest() != da["sha256"]:
                        bad.append("%s: committed file does not match its sha256" % da["file"])
                    if da["dtype"] != db["dtype"] or da["shape"] != db["shape"]:
                        bad.append("%s: dtype/shape differ" % da["file"])
                    elif da["dtype"] == "f64":
                        x, y = np.frombuffer(ba, "<f8"), np.frombuffer(bb, "<f8")
                        rel = np.max(np.abs(x - y) / np.maximum(np.abs(x), 1e-300)) if x.size else 0.0
                        if x.shape != y.shape or rel > 1e-12:
                            bad.append("%s: float64 output differs (max rel %.3g)" % (da["file"], rel))
                    elif ba != bb:
                        bad.append("%s: bytes differ" % da["file"])
        listed = {"MANIFEST.json"} | {d["file"] for e in old["fixtures"] for s in ("inputs", "outputs")
                                      for d in e[s].values()}
        for dirpath, dirs, files in os.walk(committed):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for fn in files:
                rel = os.path.relpath(os.path.join(dirpath, fn), committed)
                if rel.endswith(".bin") and rel not in listed:
                    bad.append("%s: a .bin file the manifest does not list" % rel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if bad:
        print("CHECK FAILED:\n  " + "\n  ".join(bad))
        return 1
    print("CHECK OK: %d fixtures regenerate identically (inputs byte for byte, f64 outputs within 1e-12 rel)"
          % len(old["fixtures"]))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and compare with the committed files")
    ap.add_argument("--only", nargs="*", help="generate only these fixtures into a temp dir (development)")
    a = ap.parse_args()
    if a.check:
        sys.exit(check())
    if a.only:
        tmp = tempfile.mkdtemp(prefix="k3j-ops-only-")
        generate(tmp, set(a.only))
        print("written to", tmp)
        return
    for entry in os.listdir(HERE):
        full = os.path.join(HERE, entry)
        if os.path.isdir(full) and entry != "__pycache__":
            shutil.rmtree(full)
    generate(HERE)


if __name__ == "__main__":
    main()
