"""Robustness figures of an oracle run: greedy top-1/top-2 margins, routing gaps, fp32-vs-fp64 drift."""
from __future__ import annotations

import torch

from .model import Model, greedy


def top2_margin(row):
    v = torch.topk(row, 2).values
    return float(v[0] - v[1])


def routing_gaps(record, cfg, order=False):
    """min over MoE layers and tokens of (k-th minus (k+1)-th selection score); with order=True, of
    every adjacent gap among the first k+1 scores (the selection ORDER is compared exactly too)."""
    gaps = []
    for i in range(cfg.n_layers):
        key = f"layers.{i}.moe_choice"
        if key in record:
            gaps.append(layer_routing_gap(record[key], cfg.topk, order))
    return min(gaps)


def layer_routing_gap(choice, topk, order=False):
    """routing_gaps of one layer's selection scores [T, N]."""
    s = torch.sort(choice, dim=-1, descending=True).values
    lo = 0 if order else topk - 1
    return (s[:, lo:topk] - s[:, lo + 1:topk + 1]).min().item()


def score_checkpoint(model_dir, prompt, n_gen):
    m64 = Model(model_dir, torch.float64)
    gen, rows = greedy(m64, prompt, n_gen, incremental=True)
    ids = list(prompt) + gen
    rec = {}
    logits64 = m64.forward(ids, record=rec)
    m32 = Model(model_dir, torch.float32)
    rec32 = {}
    logits32 = m32.forward(ids, record=rec32).to(torch.float64)
    choice_drift = max(float((rec[k] - rec32[k].to(torch.float64)).abs().max())
                       for k in rec if k.endswith(".moe_choice"))
    margins = [top2_margin(logits64[len(prompt) - 1 + s]) for s in range(n_gen)]
    return {
        "min_margin": min(margins),
        "routing_gap": routing_gaps(rec, m64.cfg),
        "drift32": float((logits32 - logits64).abs().max()),
        "choice_drift32": choice_drift,
        "margin_ratio": min(margins) / float((logits32 - logits64).abs().max()),
        "gap_ratio": routing_gaps(rec, m64.cfg) / choice_drift,
        "order_gap": routing_gaps(rec, m64.cfg, order=True),
        "logit_absmax": float(logits64.abs().max()),
        "distinct_gen": len(set(gen)),
        "gen": gen,
    }
