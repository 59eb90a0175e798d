"""The MoE router (docs/semantics.md §3.7)."""
import engine_model as em
import numpy as np
from kit import F32, F64, Fixture, TINY, bf16_bits, bf16_value, fixture, normal, rng_for


# --- router ----------------------------------------------------------------------------------------------

def router_fixture(name, top_k, renorm, scaling, T=8):
    N, E = TINY["experts"], TINY["E"]
    fx = Fixture(name, "router", {"experts": N, "top_k": top_k, "renormalize": renorm, "scaling": scaling},
                 pitfall="docs/semantics.md §3.7, §11 #5, §12.2 (bias selects only; unbiased weights; renorm + 1e-20)")
    r = rng_for(name)
    for attempt in range(200):
        x = normal(r, T, E)
        gw = normal(r, N, E, scale=0.12)
        bias = r.uniform(-0.35, 0.35, N)
        xv, gv, bv = F32(x), bf16_value(bf16_bits(gw)), F32(bias)
        score = em.sigmoid(np.einsum("ti,ei->te", xv.astype(F64), gv.astype(F64)).astype(F32), F32).astype(F64)
        choice = score + bv
        reordered = 0
        ok = True
        for t in range(T):
            cb = np.sort(choice[t])[::-1]
            if np.min(cb[:top_k + 1][:-1] - cb[:top_k + 1][1:]) < 2e-3:
                ok = False
            if set(np.argsort(-choice[t])[:top_k]) != set(np.argsort(-score[t])[:top_k]):
                reordered += 1
        if ok and reordered >= T - 1:
            break
    else:
        raise SystemExit(name + ": no draw with a bias that reorders the top-k")
    fx.add("x", "f32", x)
    fx.add("gate_w", "bf16", gw)
    fx.add("bias", "f32", bias)
    v = fx.values
    fx.run = lambda A, mut=(): dict(zip(("indices", "weights"),
                                        em.router(v["x"], v["gate_w"], v["bias"], top_k, renorm, scaling, A, mut)))
    fx.exact.add("indices")
    fx.mutant("unbiased_selection", "bias ignored for selection")
    fx.mutant("biased_weights", "combine weights taken from the biased scores")
    fx.mutant("softmax_scores", "softmax instead of sigmoid scores")
    if renorm and top_k > 1:
        fx.mutant("no_renorm", "weights not renormalised")
    if renorm and top_k == 1:
        fx.mutant("renorm_even_k1", "renormalised although top_k = 1 (C README form)")
    if scaling != 1.0:
        fx.mutant("no_scaling", "routed_scaling_factor not applied")
    fx.notes.append("the bias changes the top-%d SET on %d of %d rows; adjacent biased choices differ by >= 2e-3"
                    % (top_k, reordered, T))
    return fx


@fixture
def router_ties():
    N, E, K, T = TINY["experts"], TINY["E"], TINY["top_k"], 4
    fx = Fixture("router_ties", "router", {"experts": N, "top_k": K, "renormalize": True, "scaling": TINY["scaling"]},
                 pitfall="docs/semantics.md §3.7 (top-k by repeated strict maximum: exact ties go to the LOWEST expert id)")
    r = rng_for(fx.name)
    x = normal(r, T, E)
    gw = normal(r, N, E, scale=0.05)
    bias = r.uniform(-0.05, 0.05, N)
    # experts 2 and 9 are identical and clearly on top: both picked, order decided by the tie rule;
    # experts 4 and 10 are identical and straddle the k boundary on every row: only the lower id may be picked
    gw[2] = gw[9] = 0.0
    bias[2] = bias[9] = 1.0
    gw[4] = gw[10] = 0.0
    bias[4] = bias[10] = 0.3
    fx.add("x", "f32", x)
    fx.add("gate_w", "bf16", gw)
    fx.add("bias", "f32", bias)
    v = fx.values
    fx.run = lambda A, mut=(): dict(zip(("indices", "weights"),
                                        em.router(v["x"], v["gate_w"], v["bias"], K, True, TINY["scaling"], A, mut)))
    fx.exact.add("indices")
    fx.mutant("ties_to_highest_id", "exact ties resolved to the highest expert id (e.g. >= in the scan)")
    fx.notes.append("experts 2/9 and 4/10 have identical gate rows and biases (exact ties in any precision); "
                    "expected order per row: 2, 9, 4")
    return fx


@fixture
def router_renorm_scaled():
    return router_fixture("router_renorm_scaled", TINY["top_k"], True, TINY["scaling"])


@fixture
def router_plain():
    return router_fixture("router_plain", TINY["top_k"], False, 1.0)


@fixture
def router_top1_renorm():
    return router_fixture("router_top1_renorm", 1, True, TINY["scaling"])
