"""RMSNorm and the KDA L2 norm (docs/semantics.md §3.1, §3.10)."""
import engine_model as em
import numpy as np
from kit import Fixture, fixture, normal, rng_for


# --- rmsnorm ---------------------------------------------------------------------------------------------

def rms_common(fx):
    p = fx.params
    x, w = fx.values["x"], fx.values["w"]
    fx.run = lambda A, mut=(): {"y": em.rmsnorm(x, w, p["eps"], A, mut)}
    fx.mutant("eps_outside_sqrt", "1/(sqrt(mean)+eps)")
    fx.mutant("no_eps", "eps dropped")
    fx.mutant("sum_not_mean", "sum of squares instead of the mean")
    fx.mutant("no_gain", "gain ignored")


@fixture
def rmsnorm_odd_width():
    n = 257
    fx = Fixture("rmsnorm_odd_width", "rmsnorm", {"n": n, "eps": 1e-5}, pitfall="docs/semantics.md §3.1 (eps inside sqrt, mean not sum)")
    r = rng_for(fx.name)
    rows = [normal(r, n), normal(r, n, scale=30.0) + 5.0, normal(r, n, scale=1e-3), normal(r, n, scale=3e-3),
            np.concatenate([normal(r, 8, scale=200.0), normal(r, n - 8, scale=0.01)]), normal(r, n, scale=0.05)]
    fx.add("x", "f32", np.stack(rows))
    fx.add("w", "bf16", r.uniform(0.25, 2.0, n) * np.where(r.random(n) < 0.1, -1.0, 1.0))
    rms_common(fx)
    fx.notes.append("rows 2 and 3 have mean(x^2) ~ 1e-6 and ~ 1e-5, so eps = 1e-5 dominates / matters")
    return fx


@fixture
def rmsnorm_f32_gain():
    n = 96
    fx = Fixture("rmsnorm_f32_gain", "rmsnorm", {"n": n, "eps": 1e-5}, pitfall="docs/semantics.md §3.1, §12.5 (dtype from the header)")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=2e-3), normal(r, n, scale=7.0)]))
    fx.add("w", "f32", r.uniform(-1.5, 1.5, n))
    rms_common(fx)
    return fx


# --- l2norm ----------------------------------------------------------------------------------------------

def l2_common(fx):
    x = fx.values["x"]
    fx.run = lambda A, mut=(): {"y": em.l2norm(x, fx.params["eps"], A, mut)}
    fx.mutant("mean_not_sum", "mean of squares instead of the sum")
    fx.mutant("max_norm_eps", "x / max(||x||, eps) (F.normalize style)")
    fx.mutant("eps_outside_sqrt", "x / (||x|| + eps)")


@fixture
def l2norm_head20():
    n = 20
    fx = Fixture("l2norm_head20", "l2norm", {"n": n, "eps": 1e-6}, pitfall="docs/semantics.md §3.10, §11 #10, §12.6")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=40.0), normal(r, n, scale=1e-4),
                                 normal(r, n, scale=3e-4), normal(r, n, scale=2e-5), normal(r, n, scale=0.3)]))
    l2_common(fx)
    fx.notes.append("rows 2-4 have sum(x^2) from ~1e-8 to ~2e-6, so eps = 1e-6 inside the sqrt is visible")
    return fx


@fixture
def l2norm_head128():
    n = 128
    fx = Fixture("l2norm_head128", "l2norm", {"n": n, "eps": 1e-6}, pitfall="docs/semantics.md §11 #10")
    r = rng_for(fx.name)
    fx.add("x", "f32", np.stack([normal(r, n), normal(r, n, scale=1e-4), normal(r, n, scale=5.0)]))
    l2_common(fx)
    return fx
