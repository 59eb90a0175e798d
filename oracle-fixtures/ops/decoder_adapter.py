"""decoder_layer fixtures: the reference's own layer orchestration (k3ref.model.Model._layer, docs/semantics.md §4.1) run on
the tiny-k3 config with the fixture's tensors, no checkpoint on disk. Only plumbing here."""
import os
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TINY_CONFIG = os.path.join(os.path.dirname(HERE), "tiny-k3", "config.json")


def expected(fx, ops, t, n, mut=frozenset()):
    from k3ref.model import Config, Model
    from ref_adapter import DTYPE
    dtype = DTYPE[0]
    v, p = fx.values, fx.params
    cfg = Config.load(TINY_CONFIG)
    i = p["layer_index"]
    checks = [(cfg.is_mla(i), p["is_mla"]), (cfg.attn_res_block, p["attn_res_block_size"]), (cfg.hidden, p["hidden"]),
              (cfg.rms_eps, p["rms_eps"]), (cfg.topk, p["moe.top_k"]), (cfg.routed_scale, p["moe.scaling"]),
              (cfg.latent, p["moe.latent"]), (cfg.moe_inter, p["moe.moe_inter"]), (cfg.n_experts, p["moe.experts"])]
    checks += [(cfg.n_heads, p["mla.heads"]), (cfg.qk_nope, p["mla.qk_nope"]), (cfg.qk_rope, p["mla.qk_rope"]),
               (cfg.v_head, p["mla.v_head"]), (cfg.kv_lora, p["mla.kv_lora"])] if p["is_mla"] else \
        [(cfg.kda_heads, p["kda.heads"]), (cfg.kda_head_dim, p["kda.head_dim"]), (cfg.gate_lb, p["kda.lower_bound"])]
    bad = [c for c in checks if c[0] != c[1]]
    if bad:
        raise SystemExit("decoder_layer %s: fixture params disagree with %s: %s" % (fx.name, TINY_CONFIG, bad))
    m = Model.__new__(Model)
    m.cfg, m.mut = cfg, frozenset(mut)
    W = {k: t(a) for k, a in v.items() if k not in ("partial", "snapshots")}
    pre = "block_sparse_moe.experts."

    def expert(i, e):
        return tuple(ops.mxfp4_dequant(W["%s%d.%s.weight_packed" % (pre, e, w)], W["%s%d.%s.weight_scale" % (pre, e, w)], mut=mut).to(dtype)
                     for w in ("w1", "w3", "w2"))
    m.expert = expert
    rec = {}
    snaps_in = [s for s in t(v["snapshots"])]
    out, snaps, _ = m._layer(p["layer_index"], {k: a for k, a in W.items() if not k.startswith(pre)},
                             t(v["partial"]), snaps_in, None, rec)
    i = p["layer_index"]
    g = lambda k: n(rec["layers.%d.%s" % (i, k)])
    return {"partial_out": n(out), "snapshots_out": np.stack([n(s) for s in snaps]), "attn_in": g("attn_in"),
            "attn_out": g("attn_out"), "mlp_in": g("mlp_in"), "mlp_out": g("mlp_out")}
