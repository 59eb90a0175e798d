"""Kimi K3 per-op reference math, on the official semantics (docs/semantics.md; the official math wins, §12).

Every function is pure: it computes in the dtype of its tensor inputs (float64 for the reference,
float32 to measure drift) and never mutates its arguments. Section numbers (§) refer to
docs/semantics.md. Weight matrices are [out, in] (y = x @ W.T); activations are
[T, width] (T = tokens of the call).

Mutants: every op takes ``mut`` (a set of names from MUTANTS, default empty). A mutant is a
plausible WRONG implementation (mostly the pitfalls of §11); the reference runs them so a fixture
can prove each one is visible. With ``mut`` empty the ops are the official math.
"""
from __future__ import annotations

import math

import torch

# name -> (what the wrong implementation does, where the right rule is written)
MUTANTS = {
    "alog_per_channel": ("KDA decay uses exp(A_log[d]) per channel d of the padded [head_dim] tensor "
                         "instead of exp(A_log[h]) per head", "§3.11, §12.3, §11.3"),
    "no_safe_gate": ("KDA decay in the Kimi-Linear-48B form g = -exp(A_log[h])*softplus(graw+dt_bias) "
                     "(no lower bound) instead of the safe gate lb*sigmoid(...)", "§3.11"),
    "l2_mean": ("KDA q/k L2 norm divides by sqrt(MEAN(x^2)+eps) instead of sqrt(SUM(x^2)+eps)",
                "§3.10, §11.10"),
    "conv_taps_reversed": ("short conv taps newest->oldest (w[0] multiplies the current input)",
                           "§3.9, §11.12"),
    "kda_output_before_update": ("KDA output read from the state BEFORE the delta write", "§3.12, §11.9"),
    "kda_gate_before_norm": ("KDA output: sigmoid gate applied BEFORE the head-wise RMSNorm",
                             "§3.13, §11.11"),
    "mla_lora_config_eps": ("MLA q_a/kv_a LoRA RMSNorms use rms_norm_eps (1e-5) instead of the class "
                            "default 1e-6", "§3.14, §12.1"),
    "mla_rope_dropped": ("MLA scores use only the qk_nope dims (the shared unrotated rope slot dropped; "
                         "scale unchanged)", "§3.14, §11.4"),
    "mla_scale_nope": ("MLA softmax scale qk_nope^-0.5 (128^-0.5 on K3) instead of (qk_nope+qk_rope)^-0.5",
                       "§3.14, §11.4"),
    "router_biased_weights": ("router combine weights taken from the BIASED selection score",
                              "§3.7, §11.5"),
    "router_no_renorm": ("router weights not renormalised over the top-k", "§3.7"),
    "routed_scale_ignored": ("routed_scaling_factor not applied to the combine weights", "§3.7"),
    "latent_norm_per_expert": ("LatentMoE RMSNorm applied to each expert's output instead of the "
                               "weighted SUM", "§3.17, §11.6"),
    "shared_scaled": ("shared-expert output multiplied by routed_scaling_factor (it is added unweighted)",
                      "§3.17, §11.6"),
    "situ_sigmoid_capped": ("SiTU sigmoid takes the tanh-capped gate instead of the uncapped gate",
                            "§3.8, §11.7"),
    "nibbles_swapped": ("MXFP4: high nibble read as the even element", "§3.4, §11.8"),
    "attnres_snapshot_mixed": ("AttnRes boundary snapshots the MIXED x instead of the incoming partial sum",
                               "§4.1, §11.13"),
    "attnres_no_clear": ("AttnRes boundary keeps the running partial sum instead of clearing it",
                         "§4.1, §11.13"),
    "attnres_values_normed": ("AttnRes mixes the RMS-normalised candidates instead of the raw ones",
                              "§4.1, §11.13"),
    "no_output_mix": ("model-level output AttnRes mix skipped", "§4.1 (Model), §11.13"),
    "layer_map_zero_based": ("full_attn_layers read as ZERO-based (layer i is MLA iff i in the list)",
                             "§1.4, §11.1"),
}

CHUNK = 5  # the invariance mutants' prefill chunk: boundaries inside the first prompt, within and past the conv window
# Invariance mutants: a serving engine that parts from itself (name -> (what it does, the 2026 bug it stands for)).
# Each changes only HOW a KDA layer is run over a sequence, never the math of a token, so its candidate dump is the
# B of a pair whose A is the clean candidate: `k3 conform --candidate A --against B` names where the two part.
INVARIANCE = {
    "chunk_drops_conv": (f"prefill in chunks of {CHUNK} tokens whose boundary drops the KDA conv state "
                         "(the recurrent state is carried)", "vLLM #52909"),
    "stale_snapshot": (f"prefill in chunks of {CHUNK} tokens, each chunk restored from the state snapshot "
                       "taken one chunk earlier than its own", "flashinfer #4896, sglang #31474"),
    "state_shared": ("the KDA state shared with another sequence: a fresh sequence starts from the state "
                     "another one (its tokens reversed) left behind", "sglang #36859, tt-metal #54850"),
}

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _check_mut(mut):
    unknown = set(mut) - set(MUTANTS) - set(INVARIANCE)
    if unknown:
        raise ValueError(f"unknown mutant(s): {sorted(unknown)}")
    return frozenset(mut)


def linear(x, w):
    """y = x @ W.T (no linear layer of K3 has a bias). W may be a lazily read matrix (``model.Rows``)."""
    if hasattr(w, "linear"):
        return w.linear(x)
    return x @ w.transpose(-1, -2)


def rmsnorm(x, w, eps):
    """§3.1 KimiRMSNorm over the last dim: w * (x / sqrt(mean(x^2) + eps))."""
    return w * (x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps))


def l2norm(x, eps=1e-6, mut=()):
    """§3.10 KDA q/k normalisation over the last dim: x / sqrt(sum(x^2) + 1e-6) (eps inside the sqrt)."""
    mut = _check_mut(mut)
    ss = (x * x).mean(dim=-1, keepdim=True) if "l2_mean" in mut else (x * x).sum(dim=-1, keepdim=True)
    return x / torch.sqrt(ss + eps)


def situ_glu(gate, up, b1, b2, mut=()):
    """§3.8 SiTU-GLU: (b1*tanh(g/b1) * sigmoid(g)) * (b2*tanh(u/b2)); the sigmoid takes the UNCAPPED g."""
    mut = _check_mut(mut)
    capped = b1 * torch.tanh(gate / b1)
    act = capped * torch.sigmoid(capped if "situ_sigmoid_capped" in mut else gate)
    return act * (b2 * torch.tanh(up / b2))


def short_conv(x, w, state=None, mut=()):
    """§3.9 causal depthwise ShortConvolution + SiLU over time.

    x [T, C]; w [C, k] (or the on-disk [C, 1, k]); state [C, k-1] = the previous k-1 inputs, oldest
    first (None = zero history). out[t, c] = silu(sum_j w[c, j] * in[t-(k-1)+j, c]): tap k-1
    multiplies the CURRENT input. Returns (y [T, C], new_state [C, k-1]).
    """
    mut = _check_mut(mut)
    C = x.shape[1]
    w = w.reshape(C, -1)
    k = w.shape[1]
    if "conv_taps_reversed" in mut:
        w = w.flip(1)
    hist = k - 1
    if state is None:
        state = torch.zeros(C, hist, dtype=x.dtype)
    full = torch.cat([state.transpose(0, 1), x], dim=0)  # [hist + T, C], oldest first
    T = x.shape[0]
    acc = torch.zeros_like(x)
    for j in range(k):
        acc = acc + w[:, j] * full[j:j + T]
    y = acc * torch.sigmoid(acc)
    new_state = full[full.shape[0] - hist:].transpose(0, 1).clone() if hist > 0 else torch.zeros(C, 0, dtype=x.dtype)
    return y, new_state


def kda_gate(graw, a_log, dt_bias, lower_bound, mut=()):
    """§3.11 KDA safe gate (log-decay): g[t,h,c] = lb * sigmoid(exp(A_log[h]) * (graw[t,h,c] + dt_bias[h,c])).

    graw [T, H, D]; a_log = the checkpoint tensor as stored (length >= H; §3.11: per head = its
    FIRST H entries, the rest is zero padding); dt_bias [H*D] or [H, D]. Returns g [T, H, D] <= 0.
    """
    mut = _check_mut(mut)
    T, H, D = graw.shape
    a_log = a_log.reshape(-1)
    if a_log.numel() < H:
        raise ValueError(f"A_log has {a_log.numel()} entries, the layer has {H} heads")
    if "alog_per_channel" in mut:
        if a_log.numel() < D:
            raise ValueError(f"alog_per_channel mutant needs A_log of length head_dim={D}, got {a_log.numel()}")
        a = torch.exp(a_log[:D]).reshape(1, 1, D)
    else:
        a = torch.exp(a_log[:H]).reshape(1, H, 1)
    u = graw + dt_bias.reshape(1, H, D)
    if "no_safe_gate" in mut:
        return -a * torch.nn.functional.softplus(u)
    return lower_bound * torch.sigmoid(a * u)


def kda_recurrence(q, k, v, g, beta, state=None, mut=()):
    """§3.12 gated delta rule, per head, state S [H, Dk, Dv] (zero at sequence start).

    q, k [T, H, Dk] (already L2-normalised), v [T, H, Dv], g [T, H, Dk] (log decay), beta [T, H].
    Per token: S <- diag(exp(g_t)) S; u = S^T k_t; S <- S + beta_t * k_t (x) (v_t - u);
    o_t = S^T (q_t * Dk^-0.5) from the UPDATED state. Returns (o [T, H, Dv], S).
    """
    mut = _check_mut(mut)
    T, H, Dk = q.shape
    Dv = v.shape[2]
    S = torch.zeros(H, Dk, Dv, dtype=q.dtype) if state is None else state.clone()
    scale = Dk ** -0.5
    out = []
    for t in range(T):
        S = S * torch.exp(g[t]).unsqueeze(-1)
        u = torch.einsum("hkv,hk->hv", S, k[t])
        old = S
        S = S + beta[t].reshape(H, 1, 1) * k[t].unsqueeze(-1) * (v[t] - u).unsqueeze(1)
        read = old if "kda_output_before_update" in mut else S
        out.append(torch.einsum("hkv,hk->hv", read, q[t] * scale))
    return torch.stack(out, 0), S


def kda_layer(x, W, state=None, *, num_heads, head_dim, lower_bound, rms_eps, mut=(), trace=None):
    """§3.13 one KDA token mixer. x = input_layernorm output [T, E].

    W: the layer's ``self_attn.*`` tensors keyed by their name after ``self_attn.``
    ('q_proj.weight', 'q_conv1d.weight', 'A_log', 'dt_bias', 'o_norm.weight', ...).
    state: None (fresh sequence) or {'S': [H,D,D], 'q_conv'/'k_conv'/'v_conv': [P, k-1]}.
    Returns (out [T, E], new_state). ``trace`` (a dict) receives the intermediates if given.
    """
    mut = _check_mut(mut)
    T = x.shape[0]
    kw = dict(num_heads=num_heads, head_dim=head_dim, lower_bound=lower_bound, rms_eps=rms_eps)
    if "state_shared" in mut:
        inner = mut - {"state_shared"}
        if state is None:  # a fresh sequence inherits what the other sequence left
            _, state = kda_layer(x.flip(0), W, None, **kw, mut=inner)
        return kda_layer(x, W, state, **kw, mut=inner, trace=trace)
    if "chunk_drops_conv" in mut or "stale_snapshot" in mut:
        inner = mut - {"chunk_drops_conv", "stale_snapshot"}
        outs, cur, before = [], state, state
        for s0 in range(0, T, CHUNK):
            o, new = kda_layer(x[s0:s0 + CHUNK], W, cur, **kw, mut=inner)
            outs.append(o)
            if "chunk_drops_conv" in mut:
                cur = {"S": new["S"]}  # the conv history is lost at the boundary
            else:
                cur, before = before, new  # the next chunk restores the snapshot taken before this one
        return torch.cat(outs), new
    H, D = num_heads, head_dim
    st = state or {}
    q = linear(x, W["q_proj.weight"])
    k = linear(x, W["k_proj.weight"])
    v = linear(x, W["v_proj.weight"])
    q, q_conv = short_conv(q, W["q_conv1d.weight"], st.get("q_conv"), mut)
    k, k_conv = short_conv(k, W["k_conv1d.weight"], st.get("k_conv"), mut)
    v, v_conv = short_conv(v, W["v_conv1d.weight"], st.get("v_conv"), mut)
    q = l2norm(q.reshape(T, H, D), 1e-6, mut)
    k = l2norm(k.reshape(T, H, D), 1e-6, mut)
    v = v.reshape(T, H, D)
    graw = linear(linear(x, W["f_a_proj.weight"]), W["f_b_proj.weight"]).reshape(T, H, D)
    g = kda_gate(graw, W["A_log"], W["dt_bias"], lower_bound, mut)
    beta = torch.sigmoid(linear(x, W["b_proj.weight"]))
    o, S = kda_recurrence(q, k, v, g, beta, st.get("S"), mut)
    gate = torch.sigmoid(linear(x, W["g_proj.weight"]).reshape(T, H, D))
    if "kda_gate_before_norm" in mut:
        o_n = rmsnorm(o * gate, W["o_norm.weight"], rms_eps)
    else:
        o_n = rmsnorm(o, W["o_norm.weight"], rms_eps) * gate
    out = linear(o_n.reshape(T, H * D), W["o_proj.weight"])
    if trace is not None:
        trace.update(q=q, k=k, v=v, graw=graw, g=g, beta=beta, o=o, gate=gate, o_gated=o_n)
    return out, {"S": S, "q_conv": q_conv, "k_conv": k_conv, "v_conv": v_conv}


def mla_layer(x, W, cache=None, *, num_heads, qk_nope, qk_rope, v_head, rms_eps, out_gate=True,
              lora_eps=1e-6, mut=(), trace=None):
    """§3.14 Gated MLA (NoPE) over T new tokens at positions cached..cached+T-1.

    W: the layer's ``self_attn.*`` tensors keyed after ``self_attn.``. cache: None or
    {'kv': [Tc, Hm, qk_nope+v_head] (expanded k_nope then v per head), 'rope': [Tc, qk_rope]}.
    The LoRA norms use their class default eps 1e-6 (NOT rms_norm_eps); the rope slot is kept but
    never rotated and is shared by all heads; scale (qk_nope+qk_rope)^-0.5; causal softmax; output
    gate sigmoid(x Wg^T) before o_proj. Returns (out [T, E], new_cache).
    """
    mut = _check_mut(mut)
    T = x.shape[0]
    Hm, qn, qr, vh = num_heads, qk_nope, qk_rope, v_head
    qh = qn + qr
    leps = rms_eps if "mla_lora_config_eps" in mut else lora_eps
    ql = rmsnorm(linear(x, W["q_a_proj.weight"]), W["q_a_layernorm.weight"], leps)
    q = linear(ql, W["q_b_proj.weight"]).reshape(T, Hm, qh)
    ckv = linear(x, W["kv_a_proj_with_mqa.weight"])
    kv_lora = W["kv_a_layernorm.weight"].shape[0]
    c = rmsnorm(ckv[:, :kv_lora], W["kv_a_layernorm.weight"], leps)
    k_rope = ckv[:, kv_lora:kv_lora + qr]
    kv = linear(c, W["kv_b_proj.weight"]).reshape(T, Hm, qn + vh)
    if cache is not None and cache["kv"].shape[0] > 0:
        kv_all = torch.cat([cache["kv"], kv], 0)
        rope_all = torch.cat([cache["rope"], k_rope], 0)
    else:
        kv_all, rope_all = kv, k_rope
    Tk = kv_all.shape[0]
    past = Tk - T
    k_nope = kv_all[:, :, :qn]
    vals = kv_all[:, :, qn:]
    scores = torch.einsum("thd,shd->hts", q[:, :, :qn], k_nope)
    if "mla_rope_dropped" not in mut:
        scores = scores + torch.einsum("thd,sd->hts", q[:, :, qn:], rope_all)
    scale = qn ** -0.5 if "mla_scale_nope" in mut else qh ** -0.5
    scores = scores * scale
    pos_q = torch.arange(past, past + T).reshape(T, 1)
    pos_k = torch.arange(Tk).reshape(1, Tk)
    scores = scores.masked_fill(pos_k > pos_q, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    attn = torch.einsum("hts,shd->thd", p, vals).reshape(T, Hm * vh)
    if out_gate:
        attn = attn * torch.sigmoid(linear(x, W["g_proj.weight"]))
    out = linear(attn, W["o_proj.weight"])
    if trace is not None:
        trace.update(q_latent=ql, q=q, kv_latent=c, k_rope=k_rope, kv=kv, probs=p, attn_gated=attn)
    return out, {"kv": kv_all, "rope": rope_all}


def attn_res_mix(partial, snapshots, proj, norm_w, eps, mut=(), trace=None):
    """§3.15 AttnRes mix. Candidates V = [snap_0..snap_{n-1}, partial] (each [T, E], per token);
    score_n = (V_n / sqrt(mean(V_n^2)+eps)) . (norm_w * proj); p = softmax_n; result sum_n p_n V_n
    over the RAW candidates."""
    mut = _check_mut(mut)
    V = torch.stack(list(snapshots) + [partial], 0)  # [n, T, E]
    normed = V / torch.sqrt((V * V).mean(dim=-1, keepdim=True) + eps)
    fold = norm_w.reshape(-1) * proj.reshape(-1)
    p = torch.softmax((normed * fold).sum(-1), dim=0)  # [n, T]
    vals = normed if "attnres_values_normed" in mut else V
    if trace is not None:
        trace["probs"] = p
    return (p.unsqueeze(-1) * vals).sum(0)


def router(x, gate_w, bias, top_k, renorm, scale, mut=(), trace=None):
    """§3.7 sigmoid router on the full-width normed x [T, E].

    s = sigmoid(x Wg^T); selection by s + bias (bias steers SELECTION only), top_k by descending
    selection score, ties to the lower expert id; weights = the UNBIASED s at the picks,
    renormalised w/(sum w + 1e-20) when renorm and top_k > 1, times scale.
    Returns (indices [T, K] in selection order, weights [T, K]).
    """
    mut = _check_mut(mut)
    s = torch.sigmoid(linear(x, gate_w))
    choice = s + bias.reshape(1, -1) if bias is not None else s
    order = torch.sort(choice, dim=-1, descending=True, stable=True).indices
    idx = order[:, :top_k]
    w = torch.gather(choice if "router_biased_weights" in mut else s, 1, idx)
    if renorm and top_k > 1 and "router_no_renorm" not in mut:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    if "routed_scale_ignored" not in mut:
        w = w * scale
    if trace is not None:
        trace.update(scores=s, choice=choice, order=order)
    return idx, w


def mxfp4_dequant(packed, scales, group=32, e8m0_255="zero", mut=()):
    """§3.4 MXFP4 (compressed-tensors mxfp4-pack-quantized) -> float64 [R, 2*C].

    packed U8 [R, C]: byte j holds element 2j in the LOW nibble and 2j+1 in the HIGH nibble.
    scales U8 [R, 2C/group]: E8M0, value 2^(byte-127). Byte 255 is NaN in the OCP spec (§3.4, §12.4);
    the project contract (docs/semantics.md §3.4, §12.4) maps it to 0 (the whole group zeroed) because
    the official writer never produces it: e8m0_255="zero" (default) or "nan" (spec).
    """
    mut = _check_mut(mut)
    if e8m0_255 not in ("zero", "nan"):
        raise ValueError("e8m0_255 must be 'zero' or 'nan'")
    R, C = packed.shape
    n = 2 * C
    if scales.shape[0] != R or scales.shape[1] * group != n:
        raise ValueError(f"scales {tuple(scales.shape)} do not fit packed {tuple(packed.shape)} with group {group}")
    # one table lookup per byte: byte b -> (value of its low nibble, value of its high nibble)
    lut = torch.tensor(E2M1, dtype=torch.float64)
    b = torch.arange(256)
    lo, hi = b & 0xF, (b >> 4) & 0xF
    if "nibbles_swapped" in mut:
        lo, hi = hi, lo
    pairs = torch.stack([lut[lo], lut[hi]], -1)  # [256, 2]
    vals = pairs[packed.to(torch.int64)].reshape(R, n)
    sc = torch.pow(torch.tensor(2.0, dtype=torch.float64), (b - 127).to(torch.float64))
    sc[255] = 0.0 if e8m0_255 == "zero" else float("nan")
    return (vals.reshape(R, n // group, group) * sc[scales.to(torch.int64)].unsqueeze(-1)).reshape(R, n)


def mxfp4_quantize(w, group=32):
    """Inverse helper for fixture generators: float [R, n] -> (packed U8 [R, n/2], scales U8 [R, n/group]).
    Per group the smallest power-of-two scale with max|w|/scale <= 6, then round-to-nearest E2M1
    (ties to the lower magnitude code)."""
    w = w.to(torch.float64)
    R, n = w.shape
    G = w.reshape(R, n // group, group)
    amax = G.abs().amax(-1).clamp_min(1e-30)
    exp = torch.ceil(torch.log2(amax / 6.0))
    sbyte = (exp + 127).clamp(0, 254).to(torch.int64)
    scale = torch.pow(torch.tensor(2.0, dtype=torch.float64), (sbyte - 127).to(torch.float64)).unsqueeze(-1)
    mag = torch.tensor(E2M1[:8], dtype=torch.float64)
    y = (G / scale).abs().unsqueeze(-1)
    code = (y - mag).abs().argmin(-1)
    code = torch.where((G < 0) & (code > 0), code + 8, code).reshape(R, n)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8)
    return packed, sbyte.to(torch.uint8)


def dense_mlp(x, W, b1, b2, mut=()):
    """§3.18 dense SiTU MLP (layer 0): down(situ(gate x, up x)). W keyed after ``mlp.``."""
    return linear(situ_glu(linear(x, W["gate_proj.weight"]), linear(x, W["up_proj.weight"]), b1, b2, mut),
                  W["down_proj.weight"])


def latent_moe(x, W, experts, *, top_k, renorm, scale, rms_eps, b1, b2, latent_norm=True, mut=(), trace=None):
    """§3.17 Stable LatentMoE. x = post_attention_layernorm output [T, E].

    W: the layer's ``block_sparse_moe.*`` non-expert tensors keyed after ``block_sparse_moe.``.
    experts: callable e -> (w1 [I, Lt], w3 [I, Lt], w2 [Lt, I]) dequantised (or a dict e -> tuple).
    y = sum_j w_j * w2(situ(w1 z, w3 z)) with z = routed_expert_down_proj(x); RMSNorm on the SUM
    (rms_eps, routed_expert_norm); out = routed_expert_up_proj(y) + shared(x), the shared experts
    (one fused MLP) on the same full-width x, added unweighted.
    Returns (out [T, E], indices [T, K], weights [T, K]).
    """
    mut = _check_mut(mut)
    get = experts if callable(experts) else experts.__getitem__
    rt = {} if trace is not None else None
    idx, w = router(x, W["gate.weight"], W.get("gate.e_score_correction_bias"), top_k, renorm, scale, mut, rt)
    z = linear(x, W["routed_expert_down_proj.weight"])
    norm_w = W["routed_expert_norm.weight"]
    # each selected expert is fetched once and applied to every (token, slot) that chose it; the
    # per-token sum then runs in selection order j = 0..K-1
    T = x.shape[0]
    outs = torch.zeros(T, top_k, z.shape[1], dtype=z.dtype)
    for e in torch.unique(idx).tolist():
        ts, js = (idx == e).nonzero(as_tuple=True)
        w1, w3, w2 = get(int(e))
        zz = z[ts]
        e_out = linear(situ_glu(linear(zz, w1), linear(zz, w3), b1, b2, mut), w2)
        if "latent_norm_per_expert" in mut and latent_norm:
            e_out = rmsnorm(e_out, norm_w, rms_eps)
        outs[ts, js] = e_out
    y = torch.zeros_like(z)
    for j in range(top_k):
        y = y + w[:, j:j + 1] * outs[:, j]
    if latent_norm and "latent_norm_per_expert" not in mut:
        y = rmsnorm(y, norm_w, rms_eps)
    routed = linear(y, W["routed_expert_up_proj.weight"])
    shared = linear(situ_glu(linear(x, W["shared_experts.gate_proj.weight"]),
                             linear(x, W["shared_experts.up_proj.weight"]), b1, b2, mut),
                    W["shared_experts.down_proj.weight"])
    if "shared_scaled" in mut:
        shared = shared * scale
    if trace is not None:
        trace.update(rt)
        trace.update(latent_in=z, latent_sum=y, routed=routed, shared=shared)
    return routed + shared, idx, w
