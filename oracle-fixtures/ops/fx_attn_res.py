"""The AttnRes mix (docs/semantics.md §3.15)."""
import engine_model as em
import numpy as np
from kit import Fixture, TINY, fixture, normal, rng_for


# --- attn_res --------------------------------------------------------------------------------------------

def attn_res_fixture(name, S, T, E, scales):
    fx = Fixture(name, "attn_res", {"eps": TINY["rms_eps"]},
                 pitfall="docs/semantics.md §3.15, §4.1, §11 #13 (softmax over sources; keys normalised, values raw)")
    r = rng_for(name)
    src = np.stack([normal(r, T, E) * np.asarray(scales[s])[:, None] + 0.3 * normal(r, E) for s in range(S)])
    fx.add("sources", "f32", src)
    fx.add("norm_w", "bf16", r.uniform(0.4, 1.6, E))
    fx.add("proj_w", "bf16", normal(r, E, scale=0.18))
    v = fx.values
    fx.run = lambda A, mut=(): {"y": em.attn_res(v["sources"], v["norm_w"], v["proj_w"], fx.params["eps"], A, mut)}
    fx.mutant("raw_keys", "scores from the raw (un-normalised) sources")
    fx.mutant("normalised_values", "mix of the normalised sources")
    fx.mutant("fold_without_norm_gain", "norm weight left out of the score vector")
    fx.mutant("uniform_mix", "plain average (no softmax scores)")
    return fx


@fixture
def attn_res_two_snapshots():
    return attn_res_fixture("attn_res_two_snapshots", 3, 4, TINY["E"],
                            [[6.0, 0.5, 1.0, 3.0], [0.2, 2.0, 1.0, 0.05], [1.0, 1.0, 8.0, 0.3]])


@fixture
def attn_res_four_snapshots():
    return attn_res_fixture("attn_res_four_snapshots", 5, 3, 100,
                            [[1.0, 4.0, 0.1], [0.3, 1.0, 2.0], [9.0, 0.1, 1.0], [0.02, 1.0, 1.0], [1.0, 0.003, 5.0]])
