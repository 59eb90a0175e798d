"""Whole token mixers and MLPs: dense MLP, KDA layer, MLA layer, LatentMoE (docs/semantics.md §3.13-3.18)."""
import engine_model as em
import numpy as np
from kit import Fixture, TINY, fixture, normal, rng_for
from fx_products import pack_codes


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
