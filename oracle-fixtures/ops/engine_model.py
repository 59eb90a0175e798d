"""The kernels as the engine computes them (docs/semantics.md §3, docs/fp-contract.md), in numpy, with mutants.

Every function takes A, the activation dtype:
    A = np.float32  -> the fp32 engine model: float activations, double accumulators exactly where docs/fp-contract.md
                       declares them, float transcendentals. Used to MEASURE the error a correct fp32 engine makes.
    A = np.float64  -> the same math in float64. Used to measure the WRONG VARIANTS (mutants) and as a local
                       cross-check of the reference (k3ref.ops), never as the expected output.
`mut` is a set of mutant names (plausible wrong implementations); the empty set is the correct kernel.
This is the fixture writer's own model; the expected outputs come from reference-dumps/torch/k3ref/ops.py.
"""
import numpy as np

F32, F64 = np.float32, np.float64

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=F32)


def eps_of(eps, A):
    """The C engine stores eps as a float and widens it to double (docs/semantics.md §3.0)."""
    return F64(F32(eps)) if A is F32 else F64(eps)


def sigmoid(x, A):
    x = np.asarray(x, dtype=A)
    with np.errstate(over="ignore"):
        return (A(1) / (A(1) + np.exp(-x))).astype(A)


def rmsnorm(x, w, eps, A, mut=()):
    x = np.asarray(x, dtype=A)
    ss = np.sum(x.astype(F64) ** 2, axis=-1, keepdims=True)
    ms = ss if "sum_not_mean" in mut else ss / x.shape[-1]
    e = eps_of(eps, A)
    if "eps_outside_sqrt" in mut:
        inv = 1.0 / (np.sqrt(ms) + e)
    elif "no_eps" in mut:
        inv = 1.0 / np.sqrt(ms)
    else:
        inv = 1.0 / np.sqrt(ms + e)
    inv = inv.astype(A)
    if "no_gain" in mut:
        return x * inv
    return (np.asarray(w, dtype=A) * x) * inv


def l2norm(x, eps, A, mut=()):
    x = np.asarray(x, dtype=A)
    ss = np.sum(x.astype(F64) ** 2, axis=-1, keepdims=True)
    if "mean_not_sum" in mut:
        ss = ss / x.shape[-1]
    e = eps_of(eps, A)
    if "max_norm_eps" in mut:
        inv = 1.0 / np.maximum(np.sqrt(ss), e)
    elif "eps_outside_sqrt" in mut:
        inv = 1.0 / (np.sqrt(ss) + e)
    else:
        inv = 1.0 / np.sqrt(ss + e)
    return x * inv.astype(A)


def matvec(w, x, A, mut=()):
    """y[t,o] = sum_i w[o,i] x[t,i] (docs/semantics.md §3.3). At A = float32 the fp-contract v2 order: sixteen float
    accumulators a[i mod 16] by FMA (modelled as one float rounding of the exact double a*b + c), the fixed tree
    c[l] = (a[l] + a[l+8]) + (a[l+4] + a[l+12]), acc = (c0 + c2) + (c1 + c3), the tail by FMA. At float64: exact."""
    w = np.asarray(w)
    x = np.asarray(x)
    n = w.shape[1]
    full = n - n % 16
    if "drop_ragged_tail" in mut:
        w, x = w[:, :full], x[:, :full]
        n = full
    if A == F32:
        w64, x64 = w.astype(F32).astype(F64), np.asarray(x, F32).astype(F64)
        a = [np.zeros((x64.shape[0], w.shape[0]), F32) for _ in range(16)]
        for i in range(full):
            a[i % 16] = (x64[:, i:i + 1] * w64[None, :, i] + a[i % 16].astype(F64)).astype(F32)
        c = [(a[l] + a[l + 8]) + (a[l + 4] + a[l + 12]) for l in range(4)]
        acc = (c[0] + c[2]) + (c[1] + c[3])
        for i in range(full, n):
            acc = (x64[:, i:i + 1] * w64[None, :, i] + acc.astype(F64)).astype(F32)
        return acc
    return np.einsum("ti,oi->to", np.asarray(x, F64), w.astype(F64)).astype(A)


def mxfp4_dequant(packed, scales, n_in, mut=()):
    """w[r,k] = E2M1[code] * 2^(scale-127); low nibble = EVEN element; scale byte 255 zeroes its group."""
    packed = np.asarray(packed, np.uint8)
    lo, hi = packed & 0x0F, packed >> 4
    if "swap_nibbles" in mut:
        lo, hi = hi, lo
    rows = packed.shape[0]
    codes = np.stack([lo, hi], axis=-1).reshape(rows, n_in)
    vals = E2M1[codes].astype(F64)
    sb = np.asarray(scales, np.int64)
    bias = 128 if "scale_bias_128" in mut else 127
    sc = np.ldexp(np.ones(sb.shape, F64), sb - bias)
    if "scale_255_nan" in mut:                                 # the OCP spec reading
        sc = np.where(sb == 255, np.nan, sc)
    elif "scale_255_as_exponent" not in mut:
        sc = np.where(sb == 255, 0.0, sc)
    scf = np.repeat(sc, 32, axis=1)[:, :n_in]
    with np.errstate(over="ignore"):
        return (vals * scf).astype(F32)


def mxfp4_matvec(packed, scales, n_in, x, A, mut=()):
    """Per group: double sum of E2M1*x, times the group scale, groups summed in double; one rounding."""
    w = mxfp4_dequant(packed, scales, n_in, mut).astype(F64)
    x64 = np.asarray(x, dtype=A).astype(F64)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.einsum("ti,oi->to", x64, w).astype(A)


def situ_glu(gate, up, b1, b2, A, mut=()):
    g = np.asarray(gate, dtype=A)
    u = np.asarray(up, dtype=A)
    if "swap_betas" in mut:
        b1, b2 = b2, b1
    b1, b2 = A(b1), A(b2)
    if "silu_glu" in mut:
        return (g * sigmoid(g, A)) * u
    capped = g if "no_gate_cap" in mut else b1 * np.tanh(g / b1)
    sig = sigmoid(capped if "sigmoid_of_capped_gate" in mut else g, A)
    a = capped * sig
    uu = u if "no_up_cap" in mut else b2 * np.tanh(u / b2)
    return a * uu


def short_conv(w, x, state, A, mut=()):
    """Causal depthwise conv, taps oldest->newest (w[c,K-1] times the current input), fused SiLU, state = last K-1 inputs."""
    w = np.asarray(w, dtype=A)
    x = np.asarray(x, dtype=A)
    C, K = w.shape
    hist = K - 1
    if "reversed_taps" in mut:
        w = w[:, ::-1].copy()
    buf = np.zeros((C, hist), A) if "ignore_state_in" in mut else np.asarray(state, dtype=A).copy()
    if "state_newest_first" in mut:
        buf = buf[:, ::-1].copy()
    y = np.zeros_like(x)
    for t in range(x.shape[0]):
        cur = x[t]
        acc = w[:, hist] * cur
        for j in range(hist):
            acc = acc + w[:, j] * buf[:, j]
        buf = np.concatenate([buf[:, 1:], cur[:, None]], axis=1) if hist else buf
        y[t] = acc if "no_silu" in mut else acc * sigmoid(acc, A)
        if "state_stores_output" in mut and hist:
            buf[:, -1] = y[t]
    if "state_newest_first" in mut:
        buf = buf[:, ::-1].copy()
    return y, buf


def kda_gate(a_log, dt_bias, graw, heads, head_dim, lb, A, mut=()):
    """g = lb * sigmoid(exp(A_log[h]) * (graw + dt_bias)), A_log PER HEAD (first `heads` entries of a padded tensor)."""
    a_log = np.asarray(a_log, dtype=A)
    z = np.asarray(graw, dtype=A).reshape(-1, heads, head_dim)
    dt = np.asarray(dt_bias, dtype=A).reshape(heads, head_dim)
    if "a_log_per_channel" in mut:
        a = np.exp(a_log[:head_dim])[None, None, :]           # exp(A_log[d]) -- the per-channel reading
    else:
        a = np.exp(a_log[:heads])[None, :, None]
    zz = z if "no_dt_bias" in mut else z + dt
    if "softplus_gate" in mut:                                 # Kimi-Linear-48B form, no lower bound
        sp = np.logaddexp(A(0), zz).astype(A)
        g = -(a * sp)
    else:
        u = a * zz
        if "naive_sigmoid" in mut:
            with np.errstate(over="ignore", invalid="ignore"):
                s = (np.exp(u) / (A(1) + np.exp(u))).astype(A)
        else:
            s = sigmoid(u, A)
        g = A(lb) * s
    return g.reshape(np.asarray(graw).shape).astype(A)


def kda_recurrence(q, k, v, g, beta, state, A, mut=()):
    """Per head: S = diag(alpha) S; u = S^T k; S += (k*beta) (v-u)^T; o = S^T (q * D^-0.5) from the UPDATED state."""
    q = np.asarray(q, dtype=A)
    k = np.asarray(k, dtype=A)
    v = np.asarray(v, dtype=A)
    g = np.asarray(g, dtype=A)
    beta = np.asarray(beta, dtype=A)
    S = np.asarray(state, dtype=A).copy()
    T, H, D = q.shape
    qscale = A(1) / np.sqrt(A(D))
    if "q_scale_inverse_d" in mut:
        qscale = A(1) / A(D)
    o = np.zeros((T, H, D), A)
    for t in range(T):
        alpha = np.exp(g[t])                                   # [H, D] over k-rows
        qt = q[t] if "no_q_scale" in mut else q[t] * qscale
        kt, vt, bt = k[t], v[t], beta[t]
        decay = alpha[:, :, None]
        if "decay_columns" in mut:
            decay = alpha[:, None, :]
        if "skip_decay_on_zero_k" in mut:
            decay = np.where((kt == 0)[:, :, None], A(1), decay)
        if "decay_after_read" not in mut:
            S = S * decay
        u = np.zeros((H, D), A)
        if "transposed_read" in mut:
            for i in range(D):
                u = u + kt[:, i:i + 1] * S[:, :, i]
        else:
            for i in range(D):
                u = u + kt[:, i:i + 1] * S[:, i, :]
        if "decay_after_read" in mut:
            S = S * decay
        if "output_from_old_state" in mut:
            ot = np.zeros((H, D), A)
            for i in range(D):
                ot = ot + qt[:, i:i + 1] * S[:, i, :]
        for i in range(D):
            S[:, i, :] = S[:, i, :] + (kt[:, i] * bt)[:, None] * (vt - u)
        if "output_from_old_state" not in mut:
            ot = np.zeros((H, D), A)
            for i in range(D):
                ot = ot + qt[:, i:i + 1] * S[:, i, :]
        o[t] = ot
    return o, S


def kda_layer(x, W, st, p, A, mut=()):
    """docs/semantics.md §3.13 / §3.13. W: checkpoint-suffix -> values; st: states in; returns (out, states out)."""
    H, D, K = p["heads"], p["head_dim"], p["conv_kernel"]
    T = x.shape[0]
    P = H * D
    x = np.asarray(x, dtype=A)
    mv = lambda name, inp: matvec(W["self_attn." + name + ".weight"], inp, A)
    q, k, v = mv("q_proj", x), mv("k_proj", x), mv("v_proj", x)
    b = mv("b_proj", x)
    z = mv("f_b_proj", mv("f_a_proj", x))
    cm = ("reversed_taps",) if "conv_reversed_taps" in mut else ()
    q, qs = short_conv(W["self_attn.q_conv1d.weight"].reshape(P, K), q, st["q_conv_state"], A, cm)
    k, ks = short_conv(W["self_attn.k_conv1d.weight"].reshape(P, K), k, st["k_conv_state"], A, cm)
    v, vs = short_conv(W["self_attn.v_conv1d.weight"].reshape(P, K), v, st["v_conv_state"], A, cm)
    q = l2norm(q.reshape(T, H, D), 1e-6, A)
    k = l2norm(k.reshape(T, H, D), 1e-6, A)
    v = v.reshape(T, H, D)
    if "l2norm_v" in mut:
        v = l2norm(v, 1e-6, A)
    beta = sigmoid(b, A)
    gm = ("a_log_per_channel",) if "a_log_per_channel" in mut else ()
    g = kda_gate(W["self_attn.A_log"], W["self_attn.dt_bias"], z, H, D, p["lower_bound"], A, gm).reshape(T, H, D)
    rm = tuple(m for m in mut if m in ("no_q_scale", "output_from_old_state"))
    o, S = kda_recurrence(q, k, v, g, beta, st["recurrent_state"], A, rm)
    gate = sigmoid(mv("g_proj", x), A).reshape(T, H, D)
    onw = W["self_attn.o_norm.weight"]
    if "gate_then_norm" in mut:
        o = rmsnorm(o * gate, onw, p["rms_eps"], A)
    else:
        o = rmsnorm(o, onw, p["rms_eps"], A) * gate
    out = mv("o_proj", o.reshape(T, P))
    return out, {"recurrent_state": S, "q_conv_state": qs, "k_conv_state": ks, "v_conv_state": vs}


def mla_layer(x, W, p, A, mut=()):
    """docs/semantics.md §3.14 with §3.14: LoRA norms eps 1e-6, scale (qk_nope+qk_rope)^-0.5, uncached, causal."""
    Hm, qn, qr, vh, kvl = p["heads"], p["qk_nope"], p["qk_rope"], p["v_head"], p["kv_lora"]
    qh = qn + qr
    T = x.shape[0]
    x = np.asarray(x, dtype=A)
    mv = lambda name, inp: matvec(W["self_attn." + name + ".weight"], inp, A)
    leps = p["rms_eps"] if "lora_eps_from_config" in mut else 1e-6
    ql = rmsnorm(mv("q_a_proj", x), W["self_attn.q_a_layernorm.weight"], leps, A)
    q = mv("q_b_proj", ql).reshape(T, Hm, qh)
    ct = mv("kv_a_proj_with_mqa", x)
    c = rmsnorm(ct[:, :kvl], W["self_attn.kv_a_layernorm.weight"], leps, A)
    kr = ct[:, kvl:]
    kv = mv("kv_b_proj", c).reshape(T, Hm, qn + vh)
    kn, vv = kv[:, :, :qn], kv[:, :, qn:]
    if "scale_nope_only" in mut:
        scale = A(1) / np.sqrt(A(qn))
    else:
        scale = A(1) / np.sqrt(A(qh))
    d = np.einsum("thi,shi->hts", q[:, :, :qn].astype(F64), kn.astype(F64))
    if "drop_rope" not in mut:
        d = d + np.einsum("thi,si->hts", q[:, :, qn:].astype(F64), kr.astype(F64))
    sc = d.astype(A) * scale                                     # [H, T, S]
    mask = np.tril(np.ones((T, T), bool))
    if "non_causal" in mut:
        mask = np.ones((T, T), bool)
    sc = np.where(mask[None], sc, A(-np.inf))
    m = np.max(sc, axis=-1, keepdims=True)
    e = np.exp(sc - m).astype(A)
    Z = np.sum(e.astype(F64), axis=-1, keepdims=True)
    pr = (e.astype(F64) / Z).astype(A)
    o = np.zeros((T, Hm, vh), A)
    for s in range(T):
        o = o + pr[:, :, s].T[:, :, None] * vv[s][None, :, :]
    o = o.reshape(T, Hm * vh)
    if "no_output_gate" not in mut:
        o = o * sigmoid(mv("g_proj", x), A)
    return mv("o_proj", o)


def attn_res(sources, norm_w, proj_w, eps, A, mut=()):
    """docs/semantics.md §4.1 mix: keys = RMS-normalised sources scored against norm_w*proj_w, softmax over sources, values RAW."""
    src = np.asarray(sources, dtype=A)                            # [S, T, E]
    fold = np.asarray(norm_w, dtype=A) * np.asarray(proj_w, dtype=A)
    if "fold_without_norm_gain" in mut:
        fold = np.asarray(proj_w, dtype=A)
    if "raw_keys" in mut:
        kn = src
    else:
        kn = rmsnorm(src, np.ones(src.shape[-1], A), eps, A)
    score = np.sum(kn.astype(F64) * fold.astype(F64), axis=-1).astype(A)     # [S, T]
    if "uniform_mix" in mut:
        score = np.zeros_like(score)
    m = np.max(score, axis=0, keepdims=True)
    e = np.exp(score - m).astype(A)
    Z = np.sum(e.astype(F64), axis=0, keepdims=True)
    pr = (e.astype(F64) / Z).astype(A)
    vals = kn if "normalised_values" in mut else src
    out = np.zeros(src.shape[1:], A)
    for s in range(src.shape[0]):
        out = out + pr[s][:, None] * vals[s]
    return out


def router(x, gate_w, bias, top_k, renorm, scaling, A, mut=()):
    """docs/semantics.md §3.7 / §3.17: sigmoid scores, bias for SELECTION only, unbiased weights, renorm (K>1) + 1e-20, scaling."""
    logits = np.einsum("ti,ei->te", np.asarray(x, dtype=A).astype(F64), np.asarray(gate_w).astype(F64)).astype(A)
    if "softmax_scores" in mut:
        e = np.exp(logits.astype(F64) - logits.astype(F64).max(-1, keepdims=True))
        score = (e / e.sum(-1, keepdims=True)).astype(A)
    else:
        score = sigmoid(logits, A)
    choice = score if "unbiased_selection" in mut else score + np.asarray(bias, dtype=A)
    T, N = score.shape
    idx = np.zeros((T, top_k), np.int32)
    w = np.zeros((T, top_k), A)
    for t in range(T):
        c = choice[t].astype(F64).copy()
        for j in range(top_k):
            e = int(np.argmax(c))                                   # first maximal index
            if "ties_to_highest_id" in mut:
                e = int(len(c) - 1 - np.argmax(c[::-1]))
            idx[t, j] = e
            w[t, j] = choice[t, e] if "biased_weights" in mut else score[t, e]
            c[e] = -np.inf
    if renorm and "no_renorm" not in mut and (top_k > 1 or "renorm_even_k1" in mut):
        s = np.sum(w.astype(F64), axis=1, keepdims=True)
        w = w * (1.0 / (s + 1e-20)).astype(A)
    if "no_scaling" not in mut:
        w = w * A(scaling)
    return idx, w


def situ_mlp(gw, uw, dw, x, b1, b2, A, mut=()):
    g = matvec(gw, x, A)
    u = matvec(uw, x, A)
    if "swap_gate_up" in mut:
        g, u = u, g
    sm = tuple(m for m in mut if m in ("silu_glu", "no_gate_cap", "no_up_cap", "sigmoid_of_capped_gate"))
    return matvec(dw, situ_glu(g, u, b1, b2, A, sm), A)


def latent_moe(x, W, p, A, mut=()):
    """docs/semantics.md §3.17 / §3.17: route on full width, latent down-proj, MXFP4 experts in top-k order,
    RMSNorm on the weighted AGGREGATE, up-proj, plus the shared experts on the original x, unweighted."""
    x = np.asarray(x, dtype=A)
    pre = "block_sparse_moe."
    rm = tuple(m for m in mut if m in ("biased_weights", "unbiased_selection"))
    idx, w = router(x, W[pre + "gate.weight"], W[pre + "gate.e_score_correction_bias"], p["top_k"],
                    p["renormalize"], p["scaling"], A, rm)
    z = matvec(W[pre + "routed_expert_down_proj.weight"], x, A)
    Lt, I = p["latent"], p["moe_inter"]
    xm = ("swap_nibbles",) if "swap_nibbles" in mut else ()
    nw = W[pre + "routed_expert_norm.weight"]
    T = x.shape[0]
    accL = np.zeros((T, Lt), A)
    for t in range(T):
        for j in range(p["top_k"]):
            e = idx[t, j]
            ep = pre + "experts.%d." % e
            ex = lambda wn, inp, n_in: mxfp4_matvec(W[ep + wn + ".weight_packed"], W[ep + wn + ".weight_scale"],
                                                    n_in, inp[None], A, xm)[0]
            g1 = ex("w1", z[t], Lt)
            g3 = ex("w3", z[t], Lt)
            edn = ex("w2", situ_glu(g1, g3, p["beta"], p["linear_beta"], A), I)
            if "per_expert_norm" in mut:
                edn = rmsnorm(edn[None], nw, p["rms_eps"], A)[0]
            accL[t] = accL[t] + w[t, j] * edn
    if "per_expert_norm" not in mut and "no_latent_norm" not in mut:
        accL = rmsnorm(accL, nw, p["rms_eps"], A)
    out = matvec(W[pre + "routed_expert_up_proj.weight"], accL, A)
    sh = situ_mlp(W[pre + "shared_experts.gate_proj.weight"], W[pre + "shared_experts.up_proj.weight"],
                  W[pre + "shared_experts.down_proj.weight"], x, p["beta"], p["linear_beta"], A)
    if "shared_weighted" in mut:
        sh = sh * A(p["scaling"])
    return out + sh, idx, w


def decoder_layer(partial, snaps, W, p, A, mut=()):
    """docs/semantics.md §4.1 / §4.1: AttnRes mixes, boundary push-and-clear, mixer, MoE; returns the running partial.
    W: every tensor of the layer under its checkpoint suffix; p: layer_index, attn_res_block_size, is_mla, ..."""
    partial = np.asarray(partial, dtype=A)
    snaps = [np.asarray(s, dtype=A) for s in snaps]
    eps = p["rms_eps"]
    am = ("normalised_values",) if "normalised_values" in mut else ()
    mix = lambda cands, pre: attn_res(np.stack(cands), W[pre + "_norm.weight"], W[pre + "_proj.weight"].reshape(-1), eps, A, am)
    x = mix(snaps + [partial], "self_attention_res") if snaps and "skip_pre_attn_mix" not in mut else partial
    if p["layer_index"] % p["attn_res_block_size"] == 0:
        snaps = snaps + [x if "snapshot_mixed" in mut else partial]
        running = partial if "no_clear" in mut else None
    else:
        running = partial
    xn = rmsnorm(x, W["input_layernorm.weight"], eps, A)
    if p["is_mla"]:
        a = mla_layer(xn, W, p["mla"], A)
    else:
        kp = p["kda"]
        P, K = kp["heads"] * kp["head_dim"], kp["conv_kernel"]
        st = {"recurrent_state": np.zeros((kp["heads"], kp["head_dim"], kp["head_dim"]), A),
              "q_conv_state": np.zeros((P, K - 1), A), "k_conv_state": np.zeros((P, K - 1), A),
              "v_conv_state": np.zeros((P, K - 1), A)}
        a, _ = kda_layer(xn, W, st, kp, A)
    running = a if running is None else running + a
    y = mix(snaps + [running], "mlp_res")
    yn = rmsnorm(y, W["post_attention_layernorm.weight"], eps, A)
    f, _, _ = latent_moe(yn, W, p["moe"], A)
    out = (y if "return_mixed" in mut else running) + f
    return {"partial_out": out, "snapshots_out": np.stack(snaps), "attn_in": x, "attn_out": a, "mlp_in": y, "mlp_out": f}
