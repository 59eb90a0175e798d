"""Thin adapters from a fixture (its kernel, params and input arrays) to the float64 torch reference
reference-dumps/torch/k3ref/ops.py. Only argument plumbing lives here; the math is the reference's.

Kernels without a reference function of their own are composed from reference functions:
    matvec        = ops.linear
    mxfp4_matvec  = ops.linear(x, ops.mxfp4_dequant(packed, scales))
    mxfp4_dequant = ops.mxfp4_dequant (float64, then stored as f32: exact, every value is representable)
"""
import os
import sys

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "reference-dumps", "torch"))
from k3ref import ops  # noqa: E402

D = torch.float64


DTYPE = [torch.float64]          # the dtype the reference computes in (float32 only to MEASURE torch's fp32 drift)


def t(a):
    a = np.asarray(a)
    if a.dtype == np.uint8:
        return torch.from_numpy(a.copy())
    return torch.from_numpy(a.astype(np.float64)).to(DTYPE[0])


def n(x):
    if torch.is_tensor(x):
        x = x.detach().cpu()
        return (x.to(torch.float64) if x.is_floating_point() else x).numpy()
    return np.asarray(x)


def _sub(values, prefix):
    return {k[len(prefix):]: t(v) for k, v in values.items() if k.startswith(prefix)}


# reference mutants (k3ref.ops.MUTANTS) that apply to each kernel; the generator measures each one too
REF_MUTANTS = {
    "l2norm": ["l2_mean"],
    "situ_glu": ["situ_sigmoid_capped"],
    "short_conv": ["conv_taps_reversed"],
    "kda_gate": ["alog_per_channel", "no_safe_gate"],
    "kda_recurrence": ["kda_output_before_update"],
    "kda_layer": ["alog_per_channel", "no_safe_gate", "l2_mean", "conv_taps_reversed", "kda_output_before_update",
                  "kda_gate_before_norm"],
    "mla_layer": ["mla_lora_config_eps", "mla_rope_dropped", "mla_scale_nope"],
    "router": ["router_biased_weights", "router_no_renorm"],
    "attn_res": ["attnres_values_normed"],
    "dense_mlp": ["situ_sigmoid_capped"],
    "mxfp4_dequant": ["nibbles_swapped"],
    "mxfp4_matvec": ["nibbles_swapped"],
    "latent_moe": ["router_biased_weights", "router_no_renorm", "latent_norm_per_expert", "shared_scaled",
                   "situ_sigmoid_capped", "nibbles_swapped"],
    "decoder_layer": ["attnres_snapshot_mixed", "attnres_no_clear", "attnres_values_normed", "situ_sigmoid_capped",
                      "nibbles_swapped", "router_biased_weights", "latent_norm_per_expert", "shared_scaled"],
}


def ref_mutants(fx):
    names = list(REF_MUTANTS.get(fx.kernel, []))
    if fx.kernel == "router" and not (fx.params["renormalize"] and fx.params["top_k"] > 1):
        names.remove("router_no_renorm")
    if fx.kernel == "decoder_layer":
        if not fx.params["boundary"]:
            names = [m for m in names if m not in ("attnres_snapshot_mixed", "attnres_no_clear")]
        names += ["mla_lora_config_eps", "mla_rope_dropped", "mla_scale_nope"] if fx.params["is_mla"] else \
            ["alog_per_channel", "kda_output_before_update", "kda_gate_before_norm"]
    return [(m, ops.MUTANTS[m][0]) for m in names]


def expected(fx, mut=frozenset(), dtype=torch.float64):
    DTYPE[0] = dtype
    try:
        return _expected(fx, mut)
    finally:
        DTYPE[0] = torch.float64


def _expected(fx, mut):
    k, p, v = fx.kernel, fx.params, fx.values
    if k == "rmsnorm":
        return {"y": n(ops.rmsnorm(t(v["x"]), t(v["w"]), p["eps"]))}
    if k == "l2norm":
        return {"y": n(ops.l2norm(t(v["x"]), p["eps"], mut))}
    if k == "matvec":
        return {"y": n(ops.linear(t(v["x"]), t(v["w"])))}
    if k == "mxfp4_dequant":
        return {"w": n(ops.mxfp4_dequant(t(v["packed"]), t(v["scales"]), mut=mut)).astype(np.float32)}
    if k == "mxfp4_matvec":
        return {"y": n(ops.linear(t(v["x"]), ops.mxfp4_dequant(t(v["packed"]), t(v["scales"]), mut=mut).to(DTYPE[0])))}
    if k == "situ_glu":
        return {"y": n(ops.situ_glu(t(v["gate"]), t(v["up"]), p["beta"], p["linear_beta"], mut))}
    if k == "short_conv":
        y, s = ops.short_conv(t(v["x"]), t(v["w"]), t(v["state_in"]), mut)
        return {"y": n(y), "state_out": n(s)}
    if k == "kda_gate":
        H, Dh = p["heads"], p["head_dim"]
        graw = t(v["graw"]).reshape(-1, H, Dh)
        g = ops.kda_gate(graw, t(v["a_log"]), t(v["dt_bias"]), p["lower_bound"], mut)
        return {"g": n(g).reshape(np.asarray(v["graw"]).shape)}
    if k == "kda_recurrence":
        o, s = ops.kda_recurrence(t(v["q"]), t(v["k"]), t(v["v"]), t(v["g"]), t(v["beta"]), t(v["state_in"]), mut)
        return {"o": n(o), "state_out": n(s)}
    if k == "kda_layer":
        W = _sub(v, "self_attn.")
        st = {"S": t(v["recurrent_state_in"]), "q_conv": t(v["q_conv_state_in"]),
              "k_conv": t(v["k_conv_state_in"]), "v_conv": t(v["v_conv_state_in"])}
        out, so = ops.kda_layer(t(v["x"]), W, st, num_heads=p["heads"], head_dim=p["head_dim"],
                                lower_bound=p["lower_bound"], rms_eps=p["rms_eps"], mut=mut)
        return {"out": n(out), "recurrent_state_out": n(so["S"]), "q_conv_state_out": n(so["q_conv"]),
                "k_conv_state_out": n(so["k_conv"]), "v_conv_state_out": n(so["v_conv"])}
    if k == "mla_layer":
        out, _ = ops.mla_layer(t(v["x"]), _sub(v, "self_attn."), None, num_heads=p["heads"], qk_nope=p["qk_nope"],
                               qk_rope=p["qk_rope"], v_head=p["v_head"], rms_eps=p["rms_eps"], out_gate=True, mut=mut)
        return {"out": n(out)}
    if k == "router":
        idx, w = ops.router(t(v["x"]), t(v["gate_w"]), t(v["bias"]), p["top_k"], p["renormalize"], p["scaling"], mut)
        return {"indices": n(idx).astype(np.int32), "weights": n(w)}
    if k == "attn_res":
        src = t(v["sources"])
        y = ops.attn_res_mix(src[-1], list(src[:-1]), t(v["proj_w"]), t(v["norm_w"]), p["eps"], mut)
        return {"y": n(y)}
    if k == "dense_mlp":
        return {"y": n(ops.dense_mlp(t(v["x"]), _sub(v, "mlp."), p["beta"], p["linear_beta"], mut))}
    if k == "latent_moe":
        M = _sub(v, "block_sparse_moe.")
        experts = lambda e: tuple(ops.mxfp4_dequant(M["experts.%d.%s.weight_packed" % (e, w)],
                                                    M["experts.%d.%s.weight_scale" % (e, w)], mut=mut).to(DTYPE[0]) for w in ("w1", "w3", "w2"))
        y, idx, w = ops.latent_moe(t(v["x"]), M, experts, top_k=p["top_k"], renorm=p["renormalize"], scale=p["scaling"],
                                   rms_eps=p["rms_eps"], b1=p["beta"], b2=p["linear_beta"], latent_norm=True, mut=mut)
        return {"y": n(y), "indices": n(idx).astype(np.int32), "weights": n(w)}
    if k == "decoder_layer":
        import decoder_adapter
        return decoder_adapter.expected(fx, ops, t, n, mut)
    raise SystemExit("ref_adapter: no reference mapping for kernel " + k)
