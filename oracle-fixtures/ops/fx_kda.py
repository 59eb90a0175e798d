"""The KDA gate and recurrence (docs/semantics.md §3.11, §3.12)."""
import engine_model as em
import numpy as np
from kit import F32, F64, Fixture, TINY, fixture, normal, rng_for


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
