"""SiTU-GLU and the causal ShortConv (docs/semantics.md §3.8, §3.9)."""
import engine_model as em
import numpy as np
from kit import F32, F64, Fixture, TINY, fixture, normal, rng_for


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
