#!/usr/bin/python3
"""Writes the 13-layer tiny Kimi K3 oracle checkpoint (released layout) for config.json beside it.

Deterministic from SEED (torch.Generator on CPU): re-running reproduces every file byte for byte.
  /usr/bin/python3 oracle-fixtures/tiny-k3/make_tiny.py            # write the checkpoint here
  /usr/bin/python3 oracle-fixtures/tiny-k3/make_tiny.py --search 0 20   # score seeds, write nothing

Layout as released: two shards model-0000{1,2}-of-00002.safetensors + model.safetensors.index.json;
names under language_model.model. (+ language_model.lm_head.weight); BF16 trunk and norms; F32 A_log
(zero-padded to head_dim, first num_heads used), dt_bias and router bias; routed experts MXFP4
(U8 weight_packed/weight_scale), each expert's six tensors contiguous (data sorted by dtype then
name, like the safetensors writer).

The tensors are drawn by k3ref.fixture.build (its docstring lists the adversarial choices).
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "reference-dumps", "torch"))

from k3ref import fixture  # noqa: E402

SEED = 13  # chosen by --search 0 40: best routing-gap headroom with a large greedy margin (see the dump manifest)
PROMPT = [250, 17, 101, 3, 199, 64, 128, 42, 7, 230, 88, 155]
N_GEN = 20
SHARDS = 2


def shard_of(name, n_layers):
    """Layers 0..6 and the embedding in shard 1; layers 7.. and the head tensors in shard 2."""
    if ".layers." in name:
        return 0 if int(name.split(".layers.")[1].split(".")[0]) < (n_layers + 1) // 2 else 1
    return 0 if "embed_tokens" in name else 1


def write(out_dir, cfg, seed):
    T = fixture.build(cfg, seed)
    groups = [[] for _ in range(SHARDS)]
    for name in T:
        groups[shard_of(name, cfg.n_layers)].append(name)
    fixture.write_shards(out_dir, T, [fixture.by_dtype_then_name(T, g) for g in groups])  # like the safetensors writer
    fixture.write_manifest(out_dir, {
        "fixture": "tiny-k3", "generator": "oracle-fixtures/tiny-k3/make_tiny.py", "seed": seed,
        "torch": torch.__version__, "layer_map": cfg.layer_map(), "prompt_ids": PROMPT, "gen": N_GEN,
        "dump": "reference-dumps/tiny-k3"})
    return T


if __name__ == "__main__":
    fixture.main(sys.argv[1:], HERE, "tiny-k3", write, SEED, PROMPT, N_GEN)
