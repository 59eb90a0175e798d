#!/usr/bin/python3
"""Writes the near-tie Kimi K3 checkpoint (released layout) for config.json beside it: the tiny oracle's
dimensions with 2 layers (0 = KDA + dense, 1 = MLA + LatentMoE), whose layer-1 router holds two deliberate ties.

  /usr/bin/python3 oracle-fixtures/near-tie-k3/make_near_tie.py     # checkpoint, byte-identical

Tensors from k3ref.fixture.build (seed SEED), then the layer-1 router is edited (ROUTER below):
  * EXACT tie: experts TIE_A < TIE_B get the SAME gate row and the same bias (+1.0, so both are selected first by
    every token): equal selection scores; ties go to the lower id, so TIE_A comes first, in the reference and in
    any implementation that follows the rule;
  * NEAR tie: experts NEAR_C < NEAR_D get the same gate row except at column NEAR_COL, where NEAR_C holds 0 and
    NEAR_D holds 2^-30 (a BF16 value); bias +0.6 for both (they compete for the third slot of top-3). Their
    float64 selection scores differ by about 2^-32 * x[NEAR_COL]: NEAR_D wins where x[NEAR_COL] > 0 and loses
    where it is < 0, while a float32 engine rounds both to the same score and picks the lower id, NEAR_C. The
    difference is far below the float32 drift of the scores: a near-tie, not a binding error.
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "reference-dumps", "torch"))

from k3ref import fixture  # noqa: E402
from k3ref.model import PREFIX  # noqa: E402

SEED = 13
PROMPT = [250, 17, 101, 3, 199, 64, 128, 42]
N_GEN = 4
LAYER = 1
TIE_A, TIE_B = 2, 7
NEAR_C, NEAR_D, NEAR_COL = 4, 9, 0
ROUTER = {"layer": LAYER, "exact_tie": [TIE_A, TIE_B], "near_tie": [NEAR_C, NEAR_D], "near_tie_column": NEAR_COL,
          "near_tie_weight": 2.0 ** -30}


def write(out_dir, cfg, seed):
    T = fixture.build(cfg, seed)
    m = f"{PREFIX}layers.{LAYER}.block_sparse_moe."
    dt, gate = T[m + "gate.weight"]
    gate = gate.clone()
    gate[TIE_B] = gate[TIE_A]
    gate[NEAR_C, NEAR_COL] = 0.0
    gate[NEAR_D] = gate[NEAR_C]
    gate[NEAR_D, NEAR_COL] = 2.0 ** -30
    T[m + "gate.weight"] = (dt, gate)
    dt, bias = T[m + "gate.e_score_correction_bias"]
    bias = bias.clone()
    bias[TIE_A] = bias[TIE_B] = 1.0
    bias[NEAR_C] = bias[NEAR_D] = 0.6
    T[m + "gate.e_score_correction_bias"] = (dt, bias)
    fixture.write_shards(out_dir, T, [fixture.by_dtype_then_name(T, list(T))])
    fixture.write_manifest(out_dir, {
        "fixture": "near-tie-k3", "generator": "oracle-fixtures/near-tie-k3/make_near_tie.py", "seed": seed,
        "torch": torch.__version__, "layer_map": cfg.layer_map(), "prompt_ids": PROMPT, "gen": N_GEN,
        "router": ROUTER, "dump": "reference-dumps/near-tie-k3"})
    return T


if __name__ == "__main__":
    fixture.main(sys.argv[1:], HERE, "near-tie-k3", write, SEED, PROMPT, N_GEN)
