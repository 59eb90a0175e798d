#!/usr/bin/python3
"""Writes the 93-layer mini Kimi K3 oracle checkpoint (released layout, real layer map) for config.json
beside it.

Deterministic from SEED (torch.Generator on CPU): re-running reproduces every file byte for byte.
  /usr/bin/python3 oracle-fixtures/mini-k3-93/make_mini.py              # write the checkpoint here
  /usr/bin/python3 oracle-fixtures/mini-k3-93/make_mini.py --search 0 20   # score seeds, write nothing

The tensors are drawn by k3ref.fixture.build (its docstring lists the adversarial choices); this file
only decides the layout, which follows what the trunk packer and the expert cache rely on in the
release (docs/semantics.md §2.6, §5.1):
  * 7 shards model-0000s-of-00007.safetensors + model.safetensors.index.json;
  * each layer's non-expert tensors form ONE contiguous byte run in ONE shard (name order inside the
    run, so the F32 A_log / dt_bias / router bias sit between BF16 tensors);
  * a shard holds the trunk runs of its layers first, then (elsewhere, never interleaved) the routed
    experts; each expert's six U8 tensors are contiguous, canonical order (w1, w2, w3; packed before
    scale) for even expert ids and reversed for odd ones (an engine must use the header offsets);
  * the last layer of every shard but the last has its experts SPLIT: the first half beside its trunk,
    the rest at the start of the next shard's expert region (a layer's experts are not all in one
    shard, as in the release where one layer's experts outweigh a shard);
  * embed_tokens opens shard 1; the final norm, output AttnRes pair and lm_head close the last
    shard's trunk region.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "reference-dumps", "torch"))

from k3ref import fixture  # noqa: E402
from k3ref.model import LM_HEAD, PREFIX  # noqa: E402

SEED = 11  # chosen by --search 0 60: largest routing-order gap over its float32 drift, greedy margin 2164x drift
# Deep-stack knobs of k3ref.fixture.build: a 93-layer random stack amplifies float32 rounding ~1000x
# through the KDA outputs (kda_o_gain 1.0: logit drift 4e-3, gaps buried), and 1472 (layer, token) routing
# decisions with freely varying scores always contain a near-tie. Router bias ranked 0.12 apart plus a
# small gate std keeps every selection (and its order) >= 2.5e-4 away from a tie while still varying by
# token in 17 of 92 layers.
BUILD = {"gate_std": 0.025, "bias_spacing": 0.12, "kda_o_gain": 0.3}
PROMPT = [150, 17, 101, 3, 149, 64, 128, 42]
N_GEN = 8
SHARD_STARTS = [0, 13, 27, 40, 54, 67, 80]  # first layer of each shard; 93 layers in 7 shards
EXPERT_WEIGHTS = ["w1.weight_packed", "w1.weight_scale", "w2.weight_packed", "w2.weight_scale",
                  "w3.weight_packed", "w3.weight_scale"]
HEAD = [PREFIX + "norm.weight", PREFIX + "output_attn_res_norm.weight", PREFIX + "output_attn_res_proj.weight",
        LM_HEAD]


def layer_of(name):
    return int(name.split(".layers.")[1].split(".")[0]) if ".layers." in name else None


def expert_names(cfg, i, e):
    p = f"{PREFIX}layers.{i}.block_sparse_moe.experts.{e}."
    six = [p + w for w in EXPERT_WEIGHTS]
    return six if e % 2 == 0 else six[::-1]


def layout(T, cfg):
    """[names of shard s in data order] and a human-readable summary of where each run lives."""
    ends = SHARD_STARTS[1:] + [cfg.n_layers]
    trunk = {i: [] for i in range(cfg.n_layers)}
    for n in sorted(T):
        i = layer_of(n)
        if i is not None and ".experts." not in n:
            trunk[i].append(n)
    shards, summary = [], []
    carried = []  # experts of the previous shard's last layer that spill into this shard
    for s, (lo, hi) in enumerate(zip(SHARD_STARTS, ends)):
        names = [PREFIX + "embed_tokens.weight"] if s == 0 else []
        for i in range(lo, hi):
            names += trunk[i]
        if s == len(SHARD_STARTS) - 1:
            names += HEAD
        experts = list(carried)
        carried = []
        split = s < len(SHARD_STARTS) - 1
        for i in range(max(lo, cfg.first_dense), hi):
            for e in range(cfg.n_experts):
                if split and i == hi - 1 and e >= cfg.n_experts // 2:
                    carried.append((i, e))
                else:
                    experts.append((i, e))
        for i, e in experts:
            names += expert_names(cfg, i, e)
        shards.append(names)
        summary.append({"shard": f"model-{s + 1:05d}-of-{len(SHARD_STARTS):05d}.safetensors",
                        "trunk_layers": f"{lo}..{hi - 1}",
                        "experts_layer_ids": _runs(experts)})
    if carried:
        raise ValueError("experts left over after the last shard")
    return shards, summary


def _runs(experts):
    """[(layer, expert ids)] -> compact "L:e0..e1" / "L0..L1:e0..e1" strings, consecutive layers merged."""
    per_layer = []
    for i, e in experts:
        if per_layer and per_layer[-1][0] == i:
            per_layer[-1][1].append(e)
        else:
            per_layer.append((i, [e]))
    out = []
    for i, es in per_layer:
        span = (es[0], es[-1])
        if out and out[-1][2] == span and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i, span])
    return [(f"{a}" if a == b else f"{a}..{b}") + f":{s[0]}..{s[1]}" for a, b, s in out]


def write(out_dir, cfg, seed):
    T = fixture.build(cfg, seed, **BUILD)
    shards, summary = layout(T, cfg)
    fixture.write_shards(out_dir, T, shards)
    fixture.write_manifest(out_dir, {
        "fixture": "mini-k3-93", "generator": "oracle-fixtures/mini-k3-93/make_mini.py", "seed": seed,
        "build": BUILD, "torch": torch.__version__, "layer_map": cfg.layer_map(), "prompt_ids": PROMPT, "gen": N_GEN,
        "dump": "reference-dumps/mini-k3-93", "layout": summary})
    return T


if __name__ == "__main__":
    fixture.main(sys.argv[1:], HERE, "mini-k3-93", write, SEED, PROMPT, N_GEN)
