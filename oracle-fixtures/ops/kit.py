"""What every fixture family shares: the RNG seed, the tiny geometry, bf16 and ratio helpers, the Fixture record and
the registry that keeps fixtures in generation order."""
import os
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

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
