"""Expert sweep: every routed expert of every MoE layer on seeded probe inputs, stored as sketches.

A prompt routes K of N experts per token, so a dump's per-layer stages exercise a handful of experts
per layer; the sweep covers all of them (format: docs/formats.md §7.10).

Per MoE layer, P probes in the latent space and P in the expert's intermediate space (shared by the
layer's experts), and per expert and probe four outputs ("parts"):

  w1  = W1 z        (intermediate width I)    w3  = W3 z   (I)
  w2  = W2 v        (latent width Lt)         out = W2 situ(W1 z, W3 z)   (Lt; the expert's output)

Each part x is stored as a sketch S x (k numbers, S a seeded Gaussian matrix with N(0, 1/k) entries,
one for width Lt, one for I, shared by the whole dump) and its norm ||x||_2. An engine computes x' for
the same probe through its own expert path and judges ratio = ||S x' - S x|| / ||x||. For an error
e = x' - x fixed independently of the sketch seed, S e ~ N(0, ||e||^2 / k · I_k), so k ||S e||^2 / ||e||^2 is
chi-square with k degrees of freedom: an error with ||e|| = rho · budget · ||x|| is missed (ratio <=
budget) with probability P(chi2_k <= k / rho^2) (``miss_probability``).

Probes (per layer, seeded): z_p = sqrt(1/2) (c_p · Z) / sqrt(T) + sqrt(1/2) sigma ⊙ xi_p, where the
rows of Z are the layer's real latent inputs routed_expert_down_proj(mlp_norm) of the dump's T
tokens, sigma their per-coordinate RMS, c_p ~ N(0, I_T), xi_p ~ N(0, I_Lt): a Gaussian whose second
moment is half the tokens' own and half its diagonal, so it keeps the real inputs' scale per
coordinate, half their correlations, and reaches every column. v_p = rms_a · xi'_p with rms_a the RMS
of situ(W1 z_t, W3 z_t) over the tokens' own routed (token, expert) pairs. Probes are rounded to
float32 (what an engine reads) before the float64 reference uses them.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time

import torch

from . import ops

PARTS = ("w1", "w3", "w2", "out")
PROBES = 4
SKETCH_K = 16
SEED = 20261201
BUDGET_EPS32, BUDGET_FACTOR = 1.2e-7, 50.0
PROGRESS = "experts.progress.jsonl"


def miss_probability(k, rho):
    """P(chi2_k <= k / rho^2), k even: 1 - e^(-x/2) sum_{j < k/2} (x/2)^j / j!."""
    if k % 2:
        raise ValueError("k must be even")
    h = k / (2.0 * rho * rho)
    term, s = 1.0, 1.0
    for j in range(1, k // 2):
        term *= h / j
        s += term
    return max(0.0, 1.0 - math.exp(-h) * s)


def projections(latent, inter, k=SKETCH_K, seed=SEED):
    """The two sketch matrices [k, Lt] and [k, I], entries N(0, 1/k), rounded to float32."""
    g = torch.Generator().manual_seed(seed)
    s_lt = (torch.randn(k, latent, generator=g, dtype=torch.float64) / math.sqrt(k)).to(torch.float32)
    s_in = (torch.randn(k, inter, generator=g, dtype=torch.float64) / math.sqrt(k)).to(torch.float32)
    return s_lt, s_in


def probes(z_real, act_rms, inter, layer, n=PROBES, seed=SEED):
    """(z [P, Lt], v [P, I]) float32 for one layer from its real latent inputs z_real [T, Lt]."""
    g = torch.Generator().manual_seed(seed + 1 + layer)
    T, lt = z_real.shape
    c = torch.randn(n, T, generator=g, dtype=torch.float64)
    xi = torch.randn(n, lt, generator=g, dtype=torch.float64)
    xv = torch.randn(n, inter, generator=g, dtype=torch.float64)
    sigma = z_real.pow(2).mean(0).sqrt()
    z = math.sqrt(0.5) * (c @ z_real) / math.sqrt(T) + math.sqrt(0.5) * sigma * xi
    v = act_rms * xv
    return z.to(torch.float32), v.to(torch.float32)


def expert_parts(w1, w3, w2, z, v, b1, b2):
    """The four parts [4, P, width] (w1, w3 of width I; w2, out of width Lt) in the weights' dtype."""
    dt = w1.dtype
    z, v = z.to(dt), v.to(dt)
    g = ops.linear(z, w1)
    u = ops.linear(z, w3)
    out = ops.linear(ops.situ_glu(g, u, b1, b2), w2)
    return g, u, ops.linear(v, w2), out


def budgets(latent, inter):
    """The budget rule of docs/formats.md §7.4.1, eps32 · sqrt(width) · factor, per part; width = the fan-in that produced it."""
    widths = {"w1": latent, "w3": latent, "w2": inter, "out": inter}
    return {p: {"width": w, "budget": BUDGET_EPS32 * math.sqrt(w) * BUDGET_FACTOR} for p, w in widths.items()}


def _f32_bin(out_dir, key, t):
    arr = t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
    b = arr.tobytes()
    with open(os.path.join(out_dir, key + ".bin.tmp"), "wb") as f:
        f.write(b)
        f.flush()
        os.fsync(f.fileno())
    os.replace(os.path.join(out_dir, key + ".bin.tmp"), os.path.join(out_dir, key + ".bin"))
    return {"file": key + ".bin", "dtype": "F32", "shape": list(t.shape), "sha256": hashlib.sha256(b).hexdigest()}


def _sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _load_f32(out_dir, entry):
    import numpy as np
    a = np.fromfile(os.path.join(out_dir, entry["file"]), dtype="<f4").reshape(entry["shape"])
    return torch.from_numpy(a.astype("float64"))


_PAIRS = None


def dequant(packed, scales, group=32, e8m0_255="zero"):
    """ops.mxfp4_dequant, the same values, in float32 and by table: every FP4 code times a power of two is
    exact in float32 (2^-128 is a float32 subnormal), so widening to float64 gives the reference's values."""
    global _PAIRS
    if _PAIRS is None:
        lut = torch.tensor(ops.E2M1, dtype=torch.float32)
        b = torch.arange(256)
        sc = torch.pow(torch.tensor(2.0, dtype=torch.float64), torch.arange(256, dtype=torch.float64) - 127).to(torch.float32)
        _PAIRS = (torch.stack([lut[b & 0xF], lut[b >> 4]], -1), sc)
    pairs, sc = _PAIRS
    sc = sc.clone()
    sc[255] = 0.0 if e8m0_255 == "zero" else float("nan")
    R, C = packed.shape
    if scales.shape[0] != R or scales.shape[1] * group != 2 * C:
        raise ValueError(f"scales {tuple(scales.shape)} do not fit packed {tuple(packed.shape)} with group {group}")
    vals = pairs[packed.long()].reshape(R, -1, group)
    return (vals * sc[scales.long()].unsqueeze(-1)).reshape(R, 2 * C)


def expert_f32(model, i, e):
    """(w1, w3, w2) of expert e of layer i in float32 (exact), or None when every packed code is +0 (a sparse
    hole of a fixture: its parts are exactly 0 for any finite scale; a 255 scale read as NaN is not a hole)."""
    p = f"language_model.model.layers.{i}.block_sparse_moe.experts.{e}."
    raw = {w: (model.ckpt.get(p + w + ".weight_packed"), model.ckpt.get(p + w + ".weight_scale")) for w in ("w1", "w3", "w2")}
    for w, (pk, sc) in raw.items():
        if pk.dtype != torch.uint8 or sc.dtype != torch.uint8:
            raise ValueError(f"{p}{w}: MXFP4 tensors must be U8")
    if not any(bool(pk.any()) for pk, _ in raw.values()) and not (
            model.e8m0_255 == "nan" and any(bool((sc == 255).any()) for _, sc in raw.values())):
        return None
    return tuple(dequant(pk, sc, 32, model.e8m0_255) for pk, sc in raw.values())


def sweep_layer(m64, i, mlp_norm, drift=True, log=print):
    """One MoE layer: probes, every expert's sketches and norms, the float32 drift. Returns tensors + stats."""
    c = m64.cfg
    W = m64.layer(i)
    moe = "block_sparse_moe."
    z_real = ops.linear(mlp_norm, W[moe + "routed_expert_down_proj.weight"])
    # the activation scale of the tokens' own routed experts
    idx, _ = ops.router(mlp_norm, W[moe + "gate.weight"], W.get(moe + "gate.e_score_correction_bias"), c.topk,
                        c.moe_renorm, c.routed_scale)
    acts = []
    for e in torch.unique(idx).tolist():
        ts = (idx == e).any(-1).nonzero(as_tuple=True)[0]
        w1, w3, _ = (w.to(torch.float64) for w in (expert_f32(m64, i, int(e)) or m64.expert(i, int(e))))
        acts.append(ops.situ_glu(ops.linear(z_real[ts], w1), ops.linear(z_real[ts], w3), c.situ_b1, c.situ_b2))
    a = torch.cat([x.reshape(-1) for x in acts])
    act_rms = float(a.pow(2).mean().sqrt())
    z, v = probes(z_real, act_rms, c.moe_inter, i)
    s_lt, s_in = (p.to(torch.float64) for p in projections(c.latent, c.moe_inter))
    N, P, k = c.n_experts, z.shape[0], s_lt.shape[0]
    sketch = torch.zeros(N, P, len(PARTS), k, dtype=torch.float64)
    norm = torch.zeros(N, P, len(PARTS), dtype=torch.float64)
    drift = {p: 0.0 for p in PARTS}
    holes = 0
    for e in range(N):
        w32 = expert_f32(m64, i, e)
        if w32 is None:
            holes += 1  # sketch and norm stay 0
            continue
        parts = expert_parts(*(w.to(torch.float64) for w in w32), z, v, c.situ_b1, c.situ_b2)
        for j, x in enumerate(parts):
            s = s_in if PARTS[j] in ("w1", "w3") else s_lt
            sketch[e, :, j] = x @ s.T
            norm[e, :, j] = x.norm(dim=-1)
        if drift:
            parts32 = expert_parts(*w32, z, v, c.situ_b1, c.situ_b2)
            for j, (x32, x) in enumerate(zip(parts32, parts)):
                r = ((x32.to(torch.float64) - x).norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-300)).max()
                drift[PARTS[j]] = max(drift[PARTS[j]], float(r))
    return {"probes": z, "probes_inter": v, "sketch": sketch, "norm": norm}, drift, act_rms, holes


def sweep(model_dir, out_dir, *, layers=None, drift=True, cache_weights=False, e8m0_255="zero", log=print):
    """Adds the expert sweep to the dump in out_dir (its manifest and mlp_norm arrays must exist).

    Streaming: one layer's trunk and one expert at a time (cache_weights=False). Resumable: each finished
    layer is appended to experts.progress.jsonl with its arrays' sha256; a rerun skips the layers whose
    files still hash as recorded, and the manifest gains the `experts` section once every layer is done.
    """
    from .model import Model
    mpath = os.path.join(out_dir, "manifest.json")
    with open(mpath) as f:
        manifest = json.load(f)
    m64 = Model(model_dir, torch.float64, e8m0_255=e8m0_255, cache_weights=cache_weights)
    c = m64.cfg
    moe_layers = [i for i in range(c.n_layers) if c.is_moe(i)]
    todo = moe_layers if layers is None else [i for i in moe_layers if i in set(layers)]
    s_lt, s_in = projections(c.latent, c.moe_inter)
    arrays = {"experts.proj_latent": _f32_bin(out_dir, "experts.proj_latent", s_lt),
              "experts.proj_inter": _f32_bin(out_dir, "experts.proj_inter", s_in)}
    done = {}
    ppath = os.path.join(out_dir, PROGRESS)
    if os.path.exists(ppath):
        with open(ppath) as f:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                ok = all(os.path.exists(os.path.join(out_dir, a["file"]))
                         and _sha(os.path.join(out_dir, a["file"])) == a["sha256"] for a in row["arrays"].values())
                if ok:
                    done[row["index"]] = row
    if done:
        log(f"experts: resuming, {len(done)} layer(s) already swept")
    t_all = time.time()
    for n, i in enumerate(todo):
        if i in done:
            continue
        t0 = time.time()
        mlp_norm = _load_f32(out_dir, manifest["arrays"][f"layers.{i}.mlp_norm"])
        res, dr, act_rms, holes = sweep_layer(m64, i, mlp_norm, drift, log)
        row = {"index": i, "experts": c.n_experts, "all_zero_experts": holes, "act_rms": act_rms, "seconds": time.time() - t0,
               "arrays": {f"experts.{i}.{k}": _f32_bin(out_dir, f"experts.{i}.{k}", v) for k, v in res.items()}}
        if drift:
            row["drift_ratio_max"] = dr
        with open(ppath, "a") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        done[i] = row
        log(f"experts: layer {i} ({n + 1}/{len(todo)}): {c.n_experts} experts ({holes} all-zero) in {row['seconds']:.2f} s")
    rows = [done[i] for i in moe_layers if i in done]
    for r in rows:
        arrays.update(r["arrays"])
    b = budgets(c.latent, c.moe_inter)
    section = {
        "rule": ("per MoE layer, every routed expert on P probes; per probe and part x (w1 = W1 z, w3 = W3 z, "
                 "w2 = W2 v, out = W2 situ(W1 z, W3 z)) the sketch S x (S = proj_inter for w1/w3, proj_latent "
                 "for w2/out) and ||x||_2 of the float64 reference; ratio = ||S x_engine - S x_ref|| / ||x_ref|| "
                 "(0 when both are 0), pass iff ratio <= budget[part] = eps32 * sqrt(width) * factor"),
        "probe_rule": ("z_p = sqrt(1/2) (c_p Z)/sqrt(T) + sqrt(1/2) sigma * xi_p, Z = routed_expert_down_proj"
                       "(layers.<i>.mlp_norm) [T, Lt], sigma = per-coordinate RMS of Z, c_p ~ N(0, I_T), "
                       "xi_p ~ N(0, I_Lt); v_p = act_rms * xi'_p, act_rms = RMS of situ(W1 z_t, W3 z_t) over the "
                       "tokens' routed (token, expert) pairs; torch.Generator seed + 1 + layer; rounded to float32"),
        "seed": SEED, "probes": PROBES, "sketch_k": SKETCH_K, "parts": list(PARTS),
        "floats_per_expert": PROBES * len(PARTS) * (SKETCH_K + 1),
        "budget": {"eps32": BUDGET_EPS32, "factor": BUDGET_FACTOR, "parts": b},
        "detection": {
            "rule": ("an error e of a part with ||e|| = rho * budget * ||x_ref||, independent of the sketch seed, is "
                     "missed with probability P(chi2_k <= k / rho^2)"),
            "miss_probability": {str(r): miss_probability(SKETCH_K, r) for r in (1.5, 2, 3, 5, 10)}},
        "complete": [r["index"] for r in rows] == moe_layers,
        "layers": [{"index": r["index"], "experts": r["experts"], "all_zero_experts": r.get("all_zero_experts", 0),
                    "act_rms": r["act_rms"], "seconds": r["seconds"],
                    **({"drift_ratio_max": r["drift_ratio_max"]} if "drift_ratio_max" in r else {})} for r in rows],
    }
    if drift and rows:
        worst = {p: max(r["drift_ratio_max"][p] for r in rows if "drift_ratio_max" in r) for p in PARTS}
        section["fp32_drift_ratio_max"] = worst
        section["fp32_share_of_budget"] = {p: worst[p] / b[p]["budget"] for p in PARTS}
    section["seconds"] = sum(r["seconds"] for r in rows)
    manifest["experts"] = section
    manifest["arrays"].update(arrays)
    tmp = mpath + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    os.replace(tmp, mpath)
    if section["complete"] and os.path.exists(ppath):
        os.remove(ppath)
    log(f"experts: {len(rows)}/{len(moe_layers)} MoE layers in the manifest ({time.time() - t_all:.1f} s this run)")
    return section
